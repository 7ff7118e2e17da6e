/**
 * Registry credentials through the API: X-Registry-Auth on pulls (both base64 alphabets, with or
 * without padding, docker-py's capitalised keys, `auth`, identity and registry tokens, unknown
 * fields), Basic and Bearer-token registries (401 challenge, token endpoint, scopes, token reuse),
 * wrong and missing credentials, and POST /auth. The daemon must store no credentials.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { useDaemon, useSeededRegistry, type SeededRegistry } from '../harness/index.js';
import { pull, pullOk, registryAuth } from './support.js';

type Kind = 'basic' | 'token';

/** Every file under dir, recursively (the daemon's data root is small in these tests). */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isDirectory()) out.push(...filesUnder(p));
    else if (st.isFile()) out.push(p);
  }
  return out;
}

/** A JSON auth config whose standard base64 holds '+' or '/', so only a lenient decoder reads it. */
function standardAlphabetAuth(auth: Record<string, string>): string {
  for (let pad = 0; pad < 64; pad++) {
    const s = registryAuth({ ...auth, email: `${'?'.repeat(pad)}>>>~~~@example.com` }, 'base64');
    if (/[+/]/.test(s)) return s;
  }
  throw new Error('could not make a standard-alphabet header with + or /');
}

describe('registry auth', () => {
  const d = useDaemon();
  const regs: Record<Kind, () => SeededRegistry> = { basic: useSeededRegistry('basic'), token: useSeededRegistry('token') };
  const open = useSeededRegistry('open');

  for (const kind of ['basic', 'token'] as const) {
    describe(`${kind} registry`, () => {
      const r = () => regs[kind]().registry;
      const creds = () => ({ username: r().username!, password: r().password!, serveraddress: r().host });

      const encodings: { what: string; header: () => string }[] = [
        { what: 'base64url, padded', header: () => registryAuth(creds(), 'base64url', true) },
        { what: 'base64url, unpadded', header: () => registryAuth(creds(), 'base64url', false) },
        { what: 'standard base64 with + and /', header: () => standardAlphabetAuth(creds()) },
        { what: "docker-py's capitalised keys", header: () => registryAuth({ Username: r().username, Password: r().password, ServerAddress: r().host }) },
        { what: 'only `auth` (base64 user:pass)', header: () => registryAuth({ auth: Buffer.from(`${r().username}:${r().password}`).toString('base64'), serveraddress: r().host }) },
        { what: 'unknown fields next to the credentials', header: () => registryAuth({ ...creds(), email: '', bogus: { nested: [1, 2] }, Extra: 42 }) },
      ];
      for (const e of encodings) {
        it(`X-Registry-Auth ${e.what} → the pull succeeds`, async () => {
          const recs = await pullOk(d(), `${r().host}/busybox`, { tag: 'latest', auth: e.header() });
          assert.match(recs[recs.length - 1]!.status!, new RegExp(`^Status: (Downloaded newer image|Image is up to date) for ${r().host}/busybox:latest$`));
        });
      }

      it('without credentials: a clear error naming the repository, before any stream', async () => {
        const out = await pull(d(), `${r().host}/busybox`, { tag: 'latest' });
        assert.ok([401, 404].includes(out.status), `${out.status} ${out.raw}`);
        assert.match(out.error!, /docker login|authentication required|no basic auth credentials|denied|unauthorized/);
      });

      for (const [what, header] of [
        ['an empty header', ''],
        ['{}', registryAuth({})],
        ['a header that is not base64 JSON', '%%% not base64 JSON %%%'],
      ] as const) {
        it(`${what} counts as anonymous (not a 400)`, async () => {
          const out = await pull(d(), `${r().host}/busybox`, { tag: 'latest', auth: header });
          const anon = await pull(d(), `${r().host}/busybox`, { tag: 'latest' });
          assert.equal(out.status, anon.status, out.raw);
          assert.equal(out.error, anon.error);
        });
      }

      it('a wrong password → 401 with an authentication error', async () => {
        const out = await pull(d(), `${r().host}/busybox`, { tag: 'latest', auth: { ...creds(), password: 'wrong-password' } });
        assert.equal(out.status, 401, out.raw);
        assert.match(out.error!, kind === 'token' ? /incorrect username or password/ : /unauthorized|authentication required/);
        assert.equal(out.error!.includes('wrong-password'), false, 'the password is not echoed');
      });

      it('POST /auth with the right credentials → Login Succeeded', async () => {
        const res = await d().request('POST', '/auth', { body: creds() });
        assert.equal(res.status, 200, res.text());
        const body = res.json();
        assert.equal(body.Status, 'Login Succeeded');
        assert.equal(typeof body.IdentityToken, 'string');
      });

      for (const [what, addr] of [
        ['http://host', () => `http://${r().host}`],
        ['http://host/v2/', () => `http://${r().host}/v2/`],
      ] as const) {
        it(`POST /auth with serveraddress ${what}`, async () => {
          const res = await d().request('POST', '/auth', { body: { ...creds(), serveraddress: addr() } });
          assert.equal(res.status, 200, res.text());
        });
      }

      it('POST /auth ignores unknown fields', async () => {
        const res = await d().request('POST', '/auth', { body: { ...creds(), email: 'x@example.com', bogus: true, nested: { a: 1 } } });
        assert.equal(res.status, 200, res.text());
      });

      for (const [what, change] of [
        ['a wrong password', { password: 'wrong-password' }],
        ['an unknown user', { username: 'nobody-here' }],
      ] as const) {
        it(`POST /auth with ${what} → 401 with a message`, async () => {
          const res = await d().request('POST', '/auth', { body: { ...creds(), ...change } });
          assert.equal(res.status, 401, res.text());
          const msg = res.json().message as string;
          assert.match(msg, kind === 'token' ? /incorrect username or password/ : /401|unauthorized/i);
        });
      }
    });
  }

  describe('token registry specifics', () => {
    const t = () => regs.token().registry;
    const creds = () => ({ username: t().username!, password: t().password!, serveraddress: t().host });

    it('asks the token service for the repository pull scope, with the account, and reuses the token', async () => {
      const server = t().tokenServer!;
      const before = server.requests.length;
      await pullOk(d(), `${t().host}/layered`, { tag: 'latest', auth: creds() });
      const mine = server.requests.slice(before);
      assert.ok(mine.length >= 1, 'at least one token request');
      // A manifest, a config and three layers: one token covers them all.
      assert.ok(mine.length <= 2, `token requests for one pull: ${JSON.stringify(mine)}`);
      const withScope = mine.filter((m) => m.scopes.includes('repository:layered:pull'));
      assert.equal(withScope.length, 1, JSON.stringify(mine));
      assert.equal(withScope[0]!.account, t().username);
      assert.equal(withScope[0]!.auth, 'ok');
    });

    it('an identity token (OAuth refresh token) is used through the refresh_token grant', async () => {
      const server = t().tokenServer!;
      const form = new URLSearchParams({
        grant_type: 'password',
        username: t().username!,
        password: t().password!,
        service: server.service,
        client_id: 'berth-test',
        access_type: 'offline',
        scope: 'repository:busybox:pull',
      });
      const res = await fetch(server.url, { method: 'POST', body: form, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      assert.equal(res.status, 200);
      const refresh = ((await res.json()) as { refresh_token?: string }).refresh_token;
      assert.ok(refresh, 'the token server issued a refresh token');
      const before = server.requests.length;
      await pullOk(d(), `${t().host}/busybox`, { tag: '1.35', auth: { identitytoken: refresh, serveraddress: t().host } });
      const mine = server.requests.slice(before);
      assert.ok(mine.some((m) => m.grantType === 'refresh_token' && m.auth === 'ok'), JSON.stringify(mine));
    });

    it('a registry token is sent to the registry as it is', async () => {
      const server = t().tokenServer!;
      const token = server.issue(t().username!, [{ type: 'repository', name: 'busybox', actions: ['pull'] }]);
      const before = server.requests.length;
      await pullOk(d(), `${t().host}/busybox`, { tag: 'latest', auth: { registrytoken: token, serveraddress: t().host } });
      assert.equal(server.requests.length, before, 'no token request was needed');
    });

    it('a token for another repository does not open this one', async () => {
      const server = t().tokenServer!;
      const token = server.issue(t().username!, [{ type: 'repository', name: 'somewhere-else', actions: ['pull'] }]);
      const out = await pull(d(), `${t().host}/busybox`, { tag: 'latest', auth: { registrytoken: token, serveraddress: t().host } });
      assert.ok(out.error, out.raw);
      assert.ok([401, 403, 404].includes(out.status), `${out.status} ${out.raw}`);
    });
  });

  describe('open registry', () => {
    it('any credentials, or garbage, are fine where none are needed', async () => {
      const host = open().registry.host;
      await pullOk(d(), `${host}/busybox`, { tag: 'latest', auth: { username: 'someone', password: 'whatever', serveraddress: host } });
      await pullOk(d(), `${host}/busybox`, { tag: 'latest', auth: 'not-even-base64!' });
      const res = await d().request('POST', '/auth', { body: { username: 'someone', password: 'whatever', serveraddress: host } });
      assert.equal(res.status, 200, res.text());
      assert.equal(res.json().Status, 'Login Succeeded');
    });

    it('POST /auth for a registry nobody listens on fails with a message', async () => {
      const res = await d().request('POST', '/auth', { body: { username: 'u', password: 'p', serveraddress: '127.0.0.1:1' } });
      assert.ok(res.status >= 400, res.text());
      assert.match(res.json().message, /refused|ECONNREFUSED/);
    });
  });

  describe('no credentials kept', () => {
    it('after logins and pulls, neither the data root nor the log holds a password', async () => {
      const secrets = [regs.basic().registry.password!, regs.token().registry.password!];
      for (const file of filesUnder(d().dataRoot)) {
        const content = readFileSync(file);
        for (const s of secrets) assert.equal(content.includes(s), false, `${file} contains a password`);
      }
      const logs = d().logs();
      for (const s of secrets) {
        assert.equal(logs.includes(s), false, 'the daemon log contains a password');
        assert.equal(logs.includes(Buffer.from(s).toString('base64')), false, 'the daemon log contains a base64 password');
      }
    });

    it('a login does not let a later pull without X-Registry-Auth through', async () => {
      const r = regs.basic().registry;
      const login = await d().request('POST', '/auth', { body: { username: r.username, password: r.password, serveraddress: r.host } });
      assert.equal(login.status, 200);
      const out = await pull(d(), `${r.host}/layered`, { tag: 'latest' });
      assert.notEqual(out.status, 200, out.raw);
    });
  });
});
