/**
 * The API foundation through raw HTTP: versioned and unversioned paths, the version window, /_ping,
 * /version and /info, dockerd's error shape and codes, what is ignored (unknown query parameters)
 * and what is a 400 (malformed JSON and filters), and that no malformed request crashes or hangs
 * the daemon. Also a clean SIGTERM shutdown.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isRunning, startDaemon, useDaemon, withDaemonLogs, type DaemonResponse } from '../harness/index.js';

const API = '1.55';
const MIN_API = '1.24';

describe('system', () => {
  const d = useDaemon();

  function assertCommonHeaders(res: DaemonResponse, what: string): void {
    assert.equal(res.headers['api-version'], API, `${what}: Api-Version`);
    assert.equal(res.headers['ostype'], 'linux', `${what}: OSType`);
    assert.match(String(res.headers['docker-experimental']), /^(true|false)$/, `${what}: Docker-Experimental`);
    assert.ok(res.headers['server'], `${what}: Server`);
  }

  /** Sends raw bytes on the daemon socket and returns whatever comes back before the socket closes. */
  function rawExchange(socket: string, bytes: string, opts: { endAfterWrite?: boolean; waitMs?: number } = {}): Promise<string> {
    return new Promise((resolve, reject) => {
      const c = createConnection(socket);
      const chunks: Buffer[] = [];
      const timer = setTimeout(() => c.destroy(), opts.waitMs ?? 3000);
      c.on('data', (b) => chunks.push(b));
      c.on('error', reject);
      c.on('close', () => {
        clearTimeout(timer);
        resolve(Buffer.concat(chunks).toString('utf8'));
      });
      c.write(bytes);
      if (opts.endAfterWrite ?? true) c.end();
    });
  }

  describe('/_ping', () => {
    const cases = [
      { method: 'GET', path: '/_ping', body: 'OK' },
      { method: 'HEAD', path: '/_ping', body: '' },
      { method: 'GET', path: `/v${MIN_API}/_ping`, body: 'OK' },
      { method: 'HEAD', path: `/v${API}/_ping`, body: '' },
      { method: 'GET', path: '/v1.40/_ping', body: 'OK' },
    ];
    for (const c of cases) {
      it(`${c.method} ${c.path} → 200 with negotiation and cache headers`, async () => {
        const res = await d().request(c.method, c.path);
        assert.equal(res.status, 200);
        assert.equal(res.text(), c.body);
        assertCommonHeaders(res, c.path);
        assert.equal(res.headers['content-type'], 'text/plain; charset=utf-8');
        assert.match(String(res.headers['builder-version']), /^[12]$/);
        assert.equal(res.headers['cache-control'], 'no-cache, no-store, must-revalidate');
        assert.equal(res.headers['pragma'], 'no-cache');
        assert.equal(res.headers['swarm'], 'inactive');
        if (c.method === 'HEAD') assert.equal(res.headers['content-length'], '0');
      });
    }
  });

  describe('version window', () => {
    const cases: { path: string; status: number; json?: boolean; message?: string }[] = [
      { path: '/version', status: 200 },
      { path: `/v${API}/version`, status: 200 },
      { path: `/v${MIN_API}/version`, status: 200 },
      { path: '/v1.41/info', status: 200 },
      { path: '/v1.44/images/json', status: 200 },
      {
        path: '/v1.23/version',
        status: 400,
        json: false,
        message: `client version 1.23 is too old. Minimum supported API version is ${MIN_API}, please upgrade your client to a newer version`,
      },
      {
        path: '/v1.12/images/json',
        status: 400,
        json: false,
        message: `client version 1.12 is too old. Minimum supported API version is ${MIN_API}, please upgrade your client to a newer version`,
      },
      { path: '/v1.56/version', status: 400, json: true, message: `client version 1.56 is too new. Maximum supported API version is ${API}` },
      { path: '/v2.0/_ping', status: 400, json: true, message: `client version 2.0 is too new. Maximum supported API version is ${API}` },
      { path: '/v1.99/images/json', status: 400, json: true, message: `client version 1.99 is too new. Maximum supported API version is ${API}` },
    ];
    for (const c of cases) {
      it(`GET ${c.path} → ${c.status}`, async () => {
        const res = await d().request('GET', c.path);
        assert.equal(res.status, c.status, res.text());
        assertCommonHeaders(res, c.path);
        if (c.message === undefined) return;
        if (c.json) {
          assert.equal(res.headers['content-type'], 'application/json');
          assert.deepEqual(res.json(), { message: c.message });
        } else {
          // dockerd answers clients older than 1.24 in plain text.
          assert.match(String(res.headers['content-type']), /^text\/plain/);
          assert.equal(res.text().trim(), c.message);
        }
      });
    }
  });

  describe('/version and /info', () => {
    it('GET /version names the API window and the platform', async () => {
      const res = await d().request('GET', '/version');
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'application/json');
      const v = res.json();
      assert.equal(v.ApiVersion, API);
      assert.equal(v.MinAPIVersion, MIN_API);
      assert.equal(v.Os, 'linux');
      assert.match(v.Arch, /^(amd64|arm64|arm|386|ppc64le|s390x|riscv64)$/);
      assert.equal(typeof v.Version, 'string');
      assert.ok(v.Version.length > 0);
      assert.equal(typeof v.KernelVersion, 'string');
      assert.ok(Array.isArray(v.Components));
      const engine = v.Components.find((c: { Name: string }) => c.Name === 'Engine');
      assert.ok(engine, 'an Engine component');
      assert.equal(engine.Details.ApiVersion, API);
      assert.equal(engine.Details.MinAPIVersion, MIN_API);
    });

    it('GET /version answers every version in the window the same way', async () => {
      for (const v of [MIN_API, '1.40', '1.44', API]) {
        const res = await d().request('GET', `/v${v}/version`);
        assert.equal(res.status, 200, v);
        assert.equal(res.json().ApiVersion, API, v);
      }
    });

    it('GET /info describes the daemon, its store and its registries', async () => {
      const res = await d().request('GET', '/info');
      assert.equal(res.status, 200);
      const info = res.json();
      for (const k of ['Containers', 'ContainersRunning', 'ContainersPaused', 'ContainersStopped', 'Images', 'NCPU', 'MemTotal']) {
        assert.equal(typeof info[k], 'number', k);
      }
      assert.equal(info.OSType, 'linux');
      assert.equal(info.DockerRootDir, d().dataRoot);
      assert.equal(typeof info.ServerVersion, 'string');
      assert.equal(typeof info.Driver, 'string');
      assert.equal(typeof info.KernelVersion, 'string');
      assert.equal(typeof info.OperatingSystem, 'string');
      assert.equal(typeof info.Name, 'string');
      assert.ok(info.RegistryConfig, 'RegistryConfig');
      assert.ok(info.RegistryConfig.IndexConfigs['docker.io'], 'docker.io index config');
      assert.ok(info.RegistryConfig.InsecureRegistryCIDRs.includes('127.0.0.0/8'), 'loopback is insecure by default');
      assert.equal(info.Swarm.LocalNodeState, 'inactive');
      assert.equal(info.IndexServerAddress, 'https://index.docker.io/v1/');
    });
  });

  describe('errors', () => {
    const notFound: [string, string][] = [
      ['GET', '/nope'],
      ['GET', '/v1.40/nope'],
      ['GET', `/v${API}/containers/x/nonsense/deeper`],
      ['POST', '/version'],
      ['DELETE', '/_ping'],
      ['PUT', '/info'],
      ['GET', '/images/busybox/nonsense'],
      ['POST', '/images/busybox/nonsense'],
    ];
    for (const [method, path] of notFound) {
      it(`${method} ${path} → 404 {"message":"page not found"}`, async () => {
        const res = await d().request(method, path);
        assert.equal(res.status, 404);
        assert.equal(res.headers['content-type'], 'application/json');
        assert.deepEqual(res.json(), { message: 'page not found' });
        assertCommonHeaders(res, path);
      });
    }

    it('an upgrade request that fails gets a plain HTTP error with the JSON message', async () => {
      const r = await d().upgrade('POST', '/containers/no-such-container-here/attach?stream=1&stdout=1');
      assert.equal(r.upgraded, false);
      if (r.upgraded) return;
      assert.equal(r.response.statusCode, 404);
      const chunks: Buffer[] = [];
      for await (const c of r.response) chunks.push(c as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      assert.equal(typeof body.message, 'string');
      assert.match(body.message, /no-such-container-here|page not found/);
    });

    it('OPTIONS on any path → 200', async () => {
      for (const path of ['/anything', '/v1.44/images/json', '/_ping']) {
        const res = await d().request('OPTIONS', path);
        assert.equal(res.status, 200, path);
      }
    });

    const badBodies: [string, string][] = [
      ['truncated object', '{"username":"a",'],
      ['not JSON', 'username=a&password=b'],
      ['an array', '[{"username":"a"}]'],
      ['a string', '"username"'],
      ['a number', '42'],
      ['binary garbage', '\u0000\u0001\u0002\u00ff'],
      ['wrong types', '{"username":1,"password":["x"],"serveraddress":{}}'],
      ['empty object', '{}'],
    ];
    for (const [what, body] of badBodies) {
      it(`POST /auth with ${what} → 400 with a message`, async () => {
        const res = await d().request('POST', '/auth', { body, headers: { 'Content-Type': 'application/json' } });
        assert.equal(res.status, 400, res.text());
        assert.equal(res.headers['content-type'], 'application/json');
        const msg = res.json().message;
        assert.equal(typeof msg, 'string');
        assert.ok(msg.length > 0);
      });
    }

    const badQueries: [string, string][] = [
      ['GET', `/images/json?filters=${encodeURIComponent('{"dangling":')}`],
      ['GET', `/images/json?filters=${encodeURIComponent('["dangling"]')}`],
      ['GET', `/images/json?filters=${encodeURIComponent('{"dangling":"true"}')}`],
      ['GET', `/images/json?filters=${encodeURIComponent('{"no-such-filter":["x"]}')}`],
      ['GET', `/images/json?filters=${encodeURIComponent('{"dangling":["maybe"]}')}`],
      ['POST', `/images/prune?filters=${encodeURIComponent('{"dangling":["maybe"]}')}`],
      ['POST', `/images/prune?filters=${encodeURIComponent('{"until":["not a time"]}')}`],
      ['GET', `/events?since=yesterday`],
      ['POST', `/images/create?fromImage=${encodeURIComponent('UPPER/Case')}`],
      ['POST', `/images/create?fromImage=${encodeURIComponent('busybox')}&tag=${encodeURIComponent('bad tag!')}`],
      ['POST', `/images/create?fromImage=busybox&platform=${encodeURIComponent('linux//')}`],
      ['POST', `/images/busybox/tag?repo=${encodeURIComponent('Bad Repo')}`],
    ];
    for (const [method, path] of badQueries) {
      it(`${method} ${decodeURIComponent(path)} → 400`, async () => {
        const res = await d().request(method, path, { timeoutMs: 10_000 });
        // Tagging a missing image may be a 404 before the repo is looked at, as in dockerd.
        const allowed = path.includes('/tag?') ? [400, 404] : [400];
        assert.ok(allowed.includes(res.status), `${res.status} ${res.text()}`);
        assert.equal(typeof res.json().message, 'string');
      });
    }

    it('unknown query parameters are ignored', async () => {
      for (const path of ['/version?bogus=1', '/info?x=y&z', '/_ping?whatever=1', '/images/json?all=0&bogus=%7B', '/images/json?digests=1&manifests=1&shared-size=1']) {
        const res = await d().request('GET', path);
        assert.equal(res.status, 200, `${path}: ${res.text()}`);
      }
    });

    it('legacy and current filter encodings both parse', async () => {
      for (const f of ['{"dangling":["true"]}', '{"dangling":{"true":true}}', '{"label":{"a=b":true}}', '{"label":["a=b"]}']) {
        const res = await d().request('GET', `/images/json?filters=${encodeURIComponent(f)}`);
        assert.equal(res.status, 200, `${f}: ${res.text()}`);
        assert.deepEqual(res.json(), []);
      }
    });
  });

  describe('robustness', () => {
    it('a body shorter than its Content-Length, cut off, does not crash the daemon', async () => {
      await withDaemonLogs(d(), async () => {
        const pid = d().pid;
        await rawExchange(d().socket, 'POST /auth HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user');
        const ping = await d().request('GET', '/_ping');
        assert.equal(ping.status, 200);
        assert.equal(d().pid, pid);
        assert.ok(d().running);
      });
    });

    it('a garbage request line gets 400 and the daemon keeps serving', async () => {
      const reply = await rawExchange(d().socket, 'THIS IS NOT HTTP\r\n\r\n');
      assert.match(reply, /^HTTP\/1\.1 400/);
      const ping = await d().request('GET', '/_ping');
      assert.equal(ping.status, 200);
    });

    it('keep-alive: several requests on one connection all get answers', async () => {
      const one = 'GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n';
      const reply = await rawExchange(d().socket, one + one + `GET /v${API}/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`, { endAfterWrite: false });
      assert.equal(reply.match(/HTTP\/1\.1 200/g)?.length, 3, reply);
    });

    it('an idle keep-alive connection is not closed by the daemon', async () => {
      const reply = await new Promise<string>((resolve, reject) => {
        const c = createConnection(d().socket);
        let text = '';
        c.on('data', (b) => (text += b.toString()));
        c.on('error', reject);
        c.write('GET /_ping HTTP/1.1\r\nHost: x\r\n\r\n');
        // Node's default keepAliveTimeout is 5 s; stay idle past it, then reuse the connection.
        setTimeout(() => {
          if (c.destroyed) return resolve(`closed early: ${text}`);
          c.write('GET /_ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
        }, 6000);
        c.on('close', () => resolve(text));
      });
      assert.equal(reply.match(/HTTP\/1\.1 200/g)?.length, 2, reply);
    });

    it('deeply nested JSON is a 400, not a crash', async () => {
      const body = '['.repeat(100_000) + ']'.repeat(100_000);
      const res = await d().request('POST', '/auth', { body, headers: { 'Content-Type': 'application/json' } });
      assert.equal(res.status, 400);
      assert.equal((await d().request('GET', '/_ping')).status, 200);
    });
  });

  describe('shutdown', () => {
    it('SIGTERM stops the daemon cleanly, even with a stream open, and removes its pidfile', async () => {
      const t = await startDaemon();
      try {
        await withDaemonLogs(t, async () => {
          const pidfile = join(t.dir, 'berthd.pid');
          assert.equal(readFileSync(pidfile, 'utf8').trim(), String(t.pid));
          // A long-lived stream must not hold the shutdown.
          const events = await t.stream('GET', '/events');
          assert.equal(events.statusCode, 200);
          events.resume();
          const pid = t.pid;
          const started = Date.now();
          await t.stop();
          const took = Date.now() - started;
          assert.equal(isRunning(pid), false);
          // stop() falls back to SIGKILL after 10 s: a clean stop is well below that.
          assert.ok(took < 8000, `shutdown took ${took} ms`);
          assert.equal(existsSync(pidfile), false, 'pidfile removed');
          assert.match(t.logs(), /berthd stopped/);
        });
      } finally {
        await t.teardown();
      }
    });
  });
});
