/**
 * testcontainers (node, from npm; 11.x, as 12 needs Node 22) against berthd: generic containers with exposed ports and each
 * wait strategy (ports, logs, HTTP, health), exec, networks with aliases, images pulled with auth,
 * compose environments. The reaper (Ryuk) is disabled: each test stops what it started.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import tar from 'tar-stream';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { installComposePlugin, inspectContainer } from '../compose/support.js';
import type * as TC from 'testcontainers';

describe('testcontainers', () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  const authReg = useSeededRegistry('basic');
  let tc: typeof TC;
  let image = '';

  before(async () => {
    const d = daemon();
    const { registry } = authReg();
    // testcontainers reads its environment once, at the first client call.
    Object.assign(process.env, {
      DOCKER_HOST: d.dockerHost,
      DOCKER_CONFIG: d.dockerConfig,
      TESTCONTAINERS_RYUK_DISABLED: 'true',
      DOCKER_AUTH_CONFIG: JSON.stringify({ auths: { [registry.host]: { auth: Buffer.from(`${registry.username}:${registry.password}`).toString('base64') } } }),
    });
    tc = await import('testcontainers');
    image = reg().seeded.refs.busybox;
  });

  it('GenericContainer: exposed port, HTTP wait strategy, the page served on the mapped port', async () => {
    const d = daemon();
    const c = await new tc.GenericContainer(image)
      .withCommand(['sh', '-c', 'mkdir -p /www && echo tc-ok > /www/index.html && exec httpd -f -p 8080 -h /www'])
      .withExposedPorts(8080)
      .withLabels({ 'com.example.suite': 'testcontainers' })
      .withWaitStrategy(tc.Wait.forHttp('/index.html', 8080).forStatusCode(200))
      .start();
    try {
      const port = c.getMappedPort(8080);
      const body = await (await fetch(`http://${c.getHost()}:${port}/index.html`)).text();
      assert.equal(body, 'tc-ok\n');
      const info = await inspectContainer(d, c.getId());
      assert.equal(info.State.Running, true);
      assert.equal(info.Config.Labels['com.example.suite'], 'testcontainers');
      assert.equal(info.Config.Labels['org.testcontainers'], 'true');
      assert.equal(info.NetworkSettings.Ports['8080/tcp'][0].HostPort, String(port));
    } finally {
      await c.stop();
    }
    assert.equal((await d.request('GET', `/containers/${c.getId()}/json`)).status, 404, 'stop removes the container');
  });

  it('wait for listening ports (the default) and for a log message; exec with exit codes', async () => {
    const c = await new tc.GenericContainer(image)
      .withCommand(['sh', '-c', 'echo starting; sleep 1; echo "db ready"; exec nc -ll -p 6379 -e /bin/cat'])
      .withExposedPorts(6379)
      .withWaitStrategy(tc.Wait.forLogMessage(/db ready/))
      .start();
    try {
      const ok = await c.exec(['sh', '-c', 'echo out; echo err >&2']);
      assert.equal(ok.exitCode, 0);
      assert.equal(ok.stdout, 'out\n');
      assert.equal(ok.stderr, 'err\n');
      const bad = await c.exec(['sh', '-c', 'exit 3']);
      assert.equal(bad.exitCode, 3);
      const env = await c.exec(['sh', '-c', 'echo $X'], { env: { X: 'y' }, user: 'nobody', workingDir: '/tmp' });
      assert.equal(env.output.trim(), 'y');
      // The echo server answers on the mapped port.
      const { connect } = await import('node:net');
      const echoed = await new Promise<string>((resolve, reject) => {
        const s = connect(c.getMappedPort(6379), c.getHost(), () => s.write('ping\n'));
        s.on('data', (b) => { resolve(b.toString()); s.destroy(); });
        s.on('error', reject);
      });
      assert.equal(echoed, 'ping\n');
      const logs = await c.logs();
      let text = '';
      await new Promise<void>((resolve) => { logs.on('data', (b) => (text += b)); setTimeout(resolve, 300); });
      logs.destroy();
      assert.match(text, /starting\n[^]*db ready/);
    } finally {
      await c.stop();
    }
    const p = await new tc.GenericContainer(image).withCommand(['httpd', '-f', '-p', '80', '-h', '/etc']).withExposedPorts(80).start();
    try {
      assert.equal((await fetch(`http://${p.getHost()}:${p.getMappedPort(80)}/hostname`)).status, 200);
    } finally {
      await p.stop();
    }
  });

  it('wait for the healthcheck', async () => {
    const d = daemon();
    const c = await new tc.GenericContainer(image)
      .withCommand(['sh', '-c', 'sleep 1; touch /tmp/healthy; exec sleep 300'])
      .withHealthCheck({ test: ['CMD-SHELL', 'test -f /tmp/healthy'], interval: 300, timeout: 2000, retries: 30, startPeriod: 0 })
      .withWaitStrategy(tc.Wait.forHealthCheck())
      .start();
    try {
      const info = await inspectContainer(d, c.getId());
      assert.equal(info.State.Health.Status, 'healthy');
    } finally {
      await c.stop();
    }
    // A container that never gets healthy fails start with the strategy's error.
    await assert.rejects(
      new tc.GenericContainer(image)
        .withCommand(['sleep', '300'])
        .withHealthCheck({ test: ['CMD-SHELL', 'exit 1'], interval: 200, timeout: 1000, retries: 1, startPeriod: 0 })
        .withWaitStrategy(tc.Wait.forHealthCheck())
        .withStartupTimeout(15_000)
        .start(),
      /unhealthy|Health/i,
    );
  });

  it('networks with aliases: a client reaches the server by its alias; the network goes with stop', async () => {
    const d = daemon();
    const net = await new tc.Network().start();
    const server = await new tc.GenericContainer(image)
      .withNetwork(net)
      .withNetworkAliases('database', 'db')
      .withCommand(['sh', '-c', 'echo rows-ok > /tmp/rows && echo serving && exec httpd -f -p 5433 -h /tmp'])
      .withWaitStrategy(tc.Wait.forLogMessage('serving'))
      .start();
    const client = await new tc.GenericContainer(image).withNetwork(net).withCommand(['sleep', '300']).start();
    try {
      const info = await inspectContainer(d, server.getId());
      assert.ok(info.NetworkSettings.Networks[net.getName()].Aliases.includes('database'));
      let got = '';
      for (let i = 0; i < 30 && got !== 'rows-ok'; i++) {
        const r = await client.exec(['wget', '-q', '-O-', 'http://database:5433/rows']);
        got = r.output.trim();
        if (got !== 'rows-ok') await new Promise((res) => setTimeout(res, 200));
      }
      assert.equal(got, 'rows-ok');
      assert.equal((await client.exec(['wget', '-q', '-O-', 'http://db:5433/rows'])).output.trim(), 'rows-ok');
      assert.equal(server.getIpAddress(net.getName()), info.NetworkSettings.Networks[net.getName()].IPAddress);
    } finally {
      await client.stop();
      await server.stop();
      await net.stop();
    }
    assert.equal((await d.request('GET', `/networks/${net.getId()}`)).status, 404);
  });

  it('pulls an image from a registry that needs auth (DOCKER_AUTH_CONFIG)', async () => {
    const d = daemon();
    const ref = authReg().seeded.refs.busybox;
    assert.equal((await d.request('GET', `/images/${encodeURIComponent(ref)}/json`)).status, 404);
    const c = await new tc.GenericContainer(ref).withCommand(['sleep', '300']).start();
    try {
      assert.equal((await d.request('GET', `/images/${encodeURIComponent(ref)}/json`)).status, 200);
      assert.equal((await inspectContainer(d, c.getId())).Config.Image, ref);
    } finally {
      await c.stop();
    }
  });

  it('DockerComposeEnvironment: up with wait strategies, containers by name, down', async () => {
    const d = daemon();
    installComposePlugin(d);
    const dir = join(d.dir, 'tc-compose');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'compose.json'), JSON.stringify({
      services: {
        db: { image, command: ['sh', '-c', 'echo db-ok > /tmp/status && exec httpd -f -p 5433 -h /tmp'], healthcheck: { test: ['CMD', 'wget', '-q', '-O', '/dev/null', 'http://127.0.0.1:5433/status'], interval: '1s', retries: 30 } },
        web: { image, command: ['sh', '-c', 'echo "web up"; exec sleep 300'], depends_on: { db: { condition: 'service_healthy' } } },
      },
    }));
    const env = await new tc.DockerComposeEnvironment(dir, 'compose.json')
      .withProjectName('tcproj')
      .withWaitStrategy('db-1', tc.Wait.forHealthCheck())
      .withWaitStrategy('web-1', tc.Wait.forLogMessage('web up'))
      .up();
    try {
      const web = env.getContainer('web-1');
      const r = await web.exec(['wget', '-q', '-O-', 'http://db:5433/status']);
      assert.equal(r.output.trim(), 'db-ok');
      assert.equal((await inspectContainer(d, 'tcproj-db-1')).State.Health.Status, 'healthy');
    } finally {
      await env.down();
    }
    assert.equal((await d.request('GET', '/containers/tcproj-web-1/json')).status, 404);
  });

  it('copies files in and out', async () => {
    const c = await new tc.GenericContainer(image)
      .withCommand(['sleep', '300'])
      .withCopyContentToContainer([{ content: 'copied-in\n', target: '/tmp/in.txt' }])
      .start();
    try {
      assert.equal((await c.exec(['cat', '/tmp/in.txt'])).output, 'copied-in\n');
      const files: Record<string, string> = {};
      const extract = tar.extract();
      (await c.copyArchiveFromContainer('/tmp/in.txt')).pipe(extract);
      for await (const entry of extract) {
        let text = '';
        for await (const b of entry) text += String(b);
        files[entry.header.name] = text;
      }
      assert.deepEqual(files, { 'in.txt': 'copied-in\n' });
    } finally {
      await c.stop();
    }
  });

  it('GenericContainer.fromDockerfile builds and runs', async () => {
    const d = daemon();
    const dir = join(d.dir, 'tc-build');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'Dockerfile'), `FROM ${image}\nRUN echo built > /built\nCMD ["sleep", "300"]\n`);
    const built = await tc.GenericContainer.fromDockerfile(dir).build('tc-built:latest', { deleteOnExit: false });
    const c = await built.start();
    try {
      assert.equal((await c.exec(['cat', '/built'])).output, 'built\n');
    } finally {
      await c.stop();
    }
  });

  after(() => {
    for (const k of ['DOCKER_HOST', 'DOCKER_CONFIG', 'TESTCONTAINERS_RYUK_DISABLED', 'DOCKER_AUTH_CONFIG']) delete process.env[k];
  });
});
