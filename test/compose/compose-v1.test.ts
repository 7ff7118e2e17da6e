/** Docker Compose v1 (Debian's docker-compose 1.29, docker-py underneath) against berthd: the shared app suite. */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, freePort } from '../harness/index.js';
import { composeSuite } from './suite.js';
import { composeProject, httpGet, inspectContainer } from './support.js';

composeSuite('v1');

// The first report: `docker-compose up -d` of a one-service project, as a new user runs it
// (API version negotiated, no COMPOSE_API_VERSION). Compose 1.29 creates the container on the project
// network, disconnects it and connects it again with its aliases before the start.
describe('docker compose v1 as a new user runs it', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let port = 0;
  before(async () => {
    port = await freePort();
  });

  it('up -d serves the page on the project network under the service name; down removes it all', async () => {
    const d = daemon();
    const p = composeProject(d, 'v1', 'newuser', {
      services: {
        web: { image: reg().seeded.refs.busybox, command: ['sh', '-c', 'echo hello > /tmp/index.html && exec httpd -f -p 80 -h /tmp'], ports: [`127.0.0.1:${port}:80`] },
        probe: { image: reg().seeded.refs.busybox, command: ['sleep', '300'] },
      },
    }, { negotiateApi: true });
    await p.run(['up', '-d']);
    assert.equal((await httpGet(port, '/index.html')).trim(), 'hello');
    const web = await inspectContainer(d, 'newuser_web_1');
    const ep = web.NetworkSettings.Networks.newuser_default;
    assert.ok(ep.Aliases.includes('web') && ep.Aliases.includes(web.Id.slice(0, 12)), JSON.stringify(ep.Aliases));
    assert.deepEqual(Object.keys(web.NetworkSettings.Networks), ['newuser_default']);
    const byName = await p.run(['exec', '-T', 'probe', 'wget', '-q', '-O-', 'http://web/index.html']);
    assert.equal(byName.stdout.trim(), 'hello');
    await p.run(['down', '-t', '0']);
    assert.deepEqual(await p.ids('web'), []);
    assert.equal((await d.request('GET', '/networks/newuser_default')).status, 404);
  });
});
