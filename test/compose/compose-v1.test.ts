/** Docker Compose v1 (Debian's docker-compose 1.29, docker-py underneath) against berthd: the shared app suite. */
import { composeSuite } from './suite.js';

composeSuite('v1');
