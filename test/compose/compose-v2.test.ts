/** Docker Compose v2 (the `docker compose` CLI plugin, 2.40) against berthd: the shared app suite. */
import { composeSuite } from './suite.js';

composeSuite('v2');
