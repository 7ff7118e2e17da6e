/**
 * Seeded, bounded fuzzing of request bodies and query strings (BERTH_FUZZ_SEED picks the seed and
 * failures name it; BERTH_FUZZ_KEEP accepted values per create field, default 1, and
 * BERTH_FUZZ_STARTS accepted containers started, default 25, widen a run by hand).
 * Every field of the create body (Config, HostConfig with Resources, NetworkingConfig endpoints,
 * and the fields of their nested objects) is given every JSON type, huge, negative and fractional
 * numbers and an unknown enum value; likewise network create, connect, exec create and exec start.
 * A value whose JSON type the field cannot take must be a 400 naming the field; nothing may be a
 * 5xx. Then non-object, truncated, invalid and slow bodies. Afterwards `docker ps -a` and `docker
 * inspect` work for every container, a sample of the accepted containers starts without a 500 that
 * carries an internal JavaScript message, and the daemon is still the same process.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { useDaemon, useSeededRegistry, seededRandom } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';

const SEED = Number(process.env.BERTH_FUZZ_SEED ?? 20261124) >>> 0;

interface Schema {
  type?: string[];
  $ref?: string;
  allOf?: Schema[];
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema;
  enum?: (string | null)[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
}

const spec = JSON.parse(readFileSync(new URL('../../generated/engine-api-schema.json', import.meta.url), 'utf8')) as {
  operations: Record<string, { body?: Schema }>;
  definitions: Record<string, Schema>;
};

function resolve(s: Schema): Schema {
  let out = s;
  for (let i = 0; i < 10; i++) {
    if (out.$ref) out = spec.definitions[out.$ref.replace('#/definitions/', '')]!;
    // One type described again: `allOf: [{$ref}]` with no type of its own.
    else if (out.allOf?.length === 1 && !out.type) out = out.allOf[0]!;
    else break;
  }
  return out;
}

/** Every property of an object schema, allOf branches and refs followed. */
function propertiesOf(s: Schema): Record<string, Schema> {
  const r = resolve(s);
  const out: Record<string, Schema> = { ...(r.properties ?? {}) };
  for (const b of r.allOf ?? []) Object.assign(out, propertiesOf(b));
  return out;
}

interface Probe {
  value: unknown;
  what: string;
}

const LONG = 'x'.repeat(70_000);
const PROBES: Probe[] = [
  { value: 'x', what: 'a string' },
  { value: '', what: 'an empty string' },
  { value: LONG, what: 'a 70 kB string' },
  { value: '\u0000\ud800/../..', what: 'a string with NUL and a lone surrogate' },
  { value: 5, what: 'a number' },
  { value: -1, what: 'a negative number' },
  { value: -9_223_372_036_854_775_808, what: 'the smallest int64' },
  { value: 1e30, what: 'a huge number' },
  { value: -1e30, what: 'a hugely negative number' },
  { value: 1.5, what: 'a fraction' },
  { value: true, what: 'a boolean' },
  { value: [], what: 'an empty list' },
  { value: [1, 'a', null, {}, []], what: 'a mixed list' },
  { value: {}, what: 'an empty object' },
  { value: { a: 1, b: [null], c: { d: 'e' } }, what: 'an object' },
  { value: null, what: 'null' },
];

function jsonKinds(v: unknown): string[] {
  if (v === null) return ['null'];
  if (Array.isArray(v)) return ['array'];
  if (typeof v === 'number') return Number.isInteger(v) ? ['integer', 'number'] : ['number'];
  if (typeof v === 'boolean') return ['boolean'];
  return [typeof v];
}

/** True when Go's decoder would refuse the value for this field by its JSON type or range alone. */
function refusedByType(s: Schema, v: unknown): boolean {
  const r = resolve(s);
  const types = r.type ?? (r.allOf ? ['object', 'null'] : undefined);
  if (!types) return false;
  if (!jsonKinds(v).some((k) => types.includes(k))) return true;
  if (typeof v === 'number' && types.includes('integer') && !types.includes('number')) {
    if (r.minimum !== undefined && v < r.minimum) return true;
    if (r.maximum !== undefined && v > r.maximum) return true;
    if (r.exclusiveMinimum !== undefined && v <= r.exclusiveMinimum) return true;
    if (r.exclusiveMaximum !== undefined && v >= r.exclusiveMaximum) return true;
  }
  if (typeof v === 'string' && r.enum && !r.enum.includes(v)) return true;
  return false;
}

interface FieldCase {
  /** Where the value goes, from the body's root. */
  path: string[];
  schema: Schema;
}

/** The fields of a body schema, nested objects (and list elements of objects) down to `depth`. */
function fieldsOf(s: Schema, depth: number, prefix: string[] = []): FieldCase[] {
  const out: FieldCase[] = [];
  for (const [name, fs] of Object.entries(propertiesOf(s))) {
    const path = [...prefix, name];
    out.push({ path, schema: fs });
    if (depth <= 1) continue;
    const r = resolve(fs);
    if (r.properties || r.allOf) out.push(...fieldsOf(fs, depth - 1, path));
    else if (r.items && (resolve(r.items).properties || resolve(r.items).allOf)) out.push(...fieldsOf(r.items, depth - 1, [...path, '0']));
  }
  return out;
}

/** A copy of `base` with `value` placed at `path` (objects and one-element lists made on the way). */
function withValue(base: Record<string, unknown>, path: string[], value: unknown): Record<string, unknown> {
  const root = structuredClone(base);
  let node: Record<string, unknown> | unknown[] = root;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i]!;
    const nextIsIndex = path[i + 1] === '0';
    const cur = (node as Record<string, unknown>)[key];
    if (cur === undefined || cur === null || typeof cur !== 'object') (node as Record<string, unknown>)[key] = nextIsIndex ? [{}] : {};
    node = (node as Record<string, unknown>)[key] as Record<string, unknown>;
  }
  (node as Record<string, unknown>)[path[path.length - 1]!] = value;
  return root;
}

interface Sent {
  status: number;
  message: string;
  text: string;
}

async function send(d: TestDaemon, method: string, path: string, body: unknown): Promise<Sent> {
  const r = await d.request(method, path, { body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  let message = '';
  try {
    message = String((r.json() as { message?: string }).message ?? '');
  } catch {
    message = r.text();
  }
  return { status: r.status, message, text: r.text() };
}

function isJsonObject(text: string): boolean {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v);
  } catch {
    return false;
  }
}

const INTERNAL = /is not a function|Cannot read propert|is not iterable|Cannot convert|TypeError|ReferenceError|RangeError|undefined|\[object Object\]/;

/** Runs `fn` over items, `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) {
      const i = next++;
      await fn(items[i]!, i);
    }
  }));
}

describe(`request fuzzing (seed ${SEED})`, { concurrency: false }, () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  const random = seededRandom(SEED);
  let image = '';
  let pid = 0;
  const created: string[] = [];
  const networks: string[] = [];
  let requests = 0;

  before(async () => {
    const d = daemon();
    image = reg().seeded.refs.busybox;
    const pull = await d.docker(['pull', image]);
    assert.equal(pull.code, 0, pull.stderr);
    pid = d.pid;
  });


  /**
   * Sends `base` with each probe at each field. Values the field's type refuses must be a 400 that
   * names the field; of the others, `keep` per field (chosen by the seed) are sent, and must not be a 5xx.
   */
  async function fuzzFields(d: TestDaemon, method: string, path: string, base: Record<string, unknown>, fields: FieldCase[], onAccepted: (json: any) => void, keep = 1): Promise<void> {
    const cases: { body: Record<string, unknown>; refused: boolean; field: string; what: string }[] = [];
    for (const f of fields) {
      const accepted: Probe[] = [];
      const probes = [...PROBES];
      const r = resolve(f.schema);
      if (r.enum) probes.push({ value: `no-such-${f.path.at(-1)}`, what: 'an unknown enum value' });
      for (const p of probes) {
        const refused = refusedByType(f.schema, p.value);
        if (refused) cases.push({ body: withValue(base, f.path, p.value), refused, field: f.path.filter((x) => x !== '0').join('.'), what: p.what });
        else accepted.push(p);
      }
      for (let i = 0; i < keep && accepted.length; i++) {
        const p = accepted.splice(Math.floor(random() * accepted.length), 1)[0]!;
        cases.push({ body: withValue(base, f.path, p.value), refused: false, field: f.path.join('.'), what: p.what });
      }
    }
    await pool(cases, 4, async (c) => {
      requests++;
      const r = await d.request(method, path, { body: c.body });
      const text = r.text();
      const where = `seed ${SEED}: ${method} ${path} with ${c.field} = ${c.what}: ${r.status} ${text.slice(0, 300)}`;
      assert.ok(r.status < 500, where);
      if (c.refused) {
        assert.equal(r.status, 400, where);
        const last = c.field.split('.').at(-1)!;
        assert.ok(text.includes(last), `the message names the field: ${where}`);
      } else if (r.status >= 200 && r.status < 300 && text) {
        onAccepted(r.json());
      }
    });
  }

  it('every create field, every JSON type, huge and negative numbers, bad enums', async () => {
    const d = daemon();
    const body = spec.operations['POST /containers/create']!.body!;
    const fields = fieldsOf(body, 3).filter((f) => f.path[0] !== 'NetworkingConfig');
    fields.push(...fieldsOf(spec.definitions.EndpointSettings!, 2, ['NetworkingConfig', 'EndpointsConfig', 'bridge']));
    assert.ok(fields.length > 150, `fields found: ${fields.length}`);
    for (const must of ['HostConfig.NetworkMode', 'HostConfig.Binds', 'HostConfig.Mounts.0.Type', 'HostConfig.Ulimits.0.Soft', 'HostConfig.RestartPolicy.Name', 'Healthcheck.Interval', 'NetworkingConfig.EndpointsConfig.bridge.Aliases']) {
      assert.ok(fields.some((f) => f.path.join('.') === must), `${must} is fuzzed`);
    }
    await fuzzFields(d, 'POST', '/containers/create', { Image: image, Cmd: ['true'] }, fields, (j) => created.push(j.Id as string), Number(process.env.BERTH_FUZZ_KEEP ?? 1));
  });

  it('network create and connect bodies', async () => {
    const d = daemon();
    let n = 0;
    const create = spec.operations['POST /networks/create']!.body!;
    const fields = fieldsOf(create, 3).filter((f) => f.path[0] !== 'Name');
    // Each request its own name, so that accepted ones do not collide.
    const cases = fields;
    for (const f of cases) {
      const base = { Name: `fz${SEED % 1000}-${n++}` };
      await fuzzFields(d, 'POST', '/networks/create', base, [f], (j) => networks.push(j.Id as string));
    }
    const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'] } });
    assert.equal(c.status, 201, c.text());
    created.push(c.json().Id);
    const connect = spec.operations['POST /networks/{}/connect']!.body!;
    await fuzzFields(d, 'POST', '/networks/bridge/connect', { Container: c.json().Id }, fieldsOf(connect, 3).filter((f) => f.path[0] !== 'Container'), () => undefined, 0);
  });

  it('exec create and exec start bodies', async () => {
    const d = daemon();
    const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['sleep', '600'] } });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    created.push(id);
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    const execs: string[] = [];
    await fuzzFields(d, 'POST', `/containers/${id}/exec`, { Cmd: ['true'] }, fieldsOf(spec.operations['POST /containers/{}/exec']!.body!, 2), (j) => execs.push(j.Id as string));
    const ex = await d.request('POST', `/containers/${id}/exec`, { body: { Cmd: ['true'] } });
    assert.equal(ex.status, 201, ex.text());
    // Only refused values: an accepted start without Detach would hijack the connection.
    await fuzzFields(d, 'POST', `/exec/${ex.json().Id}/start`, { Detach: true }, fieldsOf(spec.operations['POST /exec/{}/start']!.body!, 2), () => undefined, 0);
  });

  it('every JSON body of the spec, refused values only: a 400 where the route exists, nothing acts', async () => {
    const d = daemon();
    for (const [key, op] of Object.entries(spec.operations)) {
      if (!op.body) continue;
      const [method, template] = key.split(' ') as [string, string];
      const path = template.replaceAll('{}', 'nothing') + (template === '/commit' ? '?container=nothing' : '');
      const fields = fieldsOf(op.body, 2);
      const cases: { body: unknown; what: string }[] = [];
      for (const f of fields) {
        for (const p of PROBES) if (refusedByType(f.schema, p.value)) cases.push({ body: withValue({}, f.path, p.value), what: `${f.path.join('.')} = ${p.what}` });
      }
      await pool(cases, 4, async (c) => {
        requests++;
        const r = await d.request(method, path, { body: c.body });
        // 404: no such route (yet) or object; 503: swarm endpoints while no swarm is active, as dockerd.
        assert.ok([400, 404, 503].includes(r.status), `seed ${SEED}: ${method} ${path} with ${c.what}: ${r.status} ${r.text().slice(0, 300)}`);
      });
    }
  });

  it('bodies that are no object, truncated, invalid or slow', async () => {
    const d = daemon();
    const good = JSON.stringify({ Image: image, Cmd: ['true'], HostConfig: { NetworkMode: 'bridge', Binds: [], RestartPolicy: { Name: 'no' } }, Labels: { a: 'b' } });
    const bodies: string[] = ['[]', '5', '"x"', 'true', '[{"Image":1}]', '{', '{"Image":', '\u0000', '{"Image":"a"}}', '{"Image":"\ud800"}', '\xff\xfe{}', '{"HostConfig":{"NetworkMode":5},"HostConfig":{}}'];
    for (let i = 0; i < 60; i++) bodies.push(good.slice(0, 1 + Math.floor(random() * (good.length - 2))));
    // Where a well-formed object would act (init a swarm, log in to a registry), only broken bodies go.
    const acting = new Set(['/swarm/init', '/services/create', '/auth']);
    for (const path of ['/containers/create', '/networks/create', '/networks/bridge/connect', '/containers/nothing/exec', '/exec/nothing/start', '/commit?container=nothing', ...acting]) {
      for (const b of bodies) {
        if (acting.has(path) && isJsonObject(b)) continue;
        requests++;
        const r = await send(d, 'POST', path, b);
        assert.ok(r.status < 500, `seed ${SEED}: POST ${path} with ${JSON.stringify(b.slice(0, 80))}: ${r.status} ${r.message}`);
        if (r.status >= 200 && r.status < 300 && path === '/containers/create') created.push(JSON.parse(r.text).Id);
      }
    }
    // Slow: the body arrives in pieces with pauses; a complete one is served, a cut one is no crash.
    for (let i = 0; i < 4; i++) {
      const cut = i % 2 === 1;
      const text = cut ? good.slice(0, 20) : good;
      const r = await new Promise<{ status: number; body: string } | undefined>((resolve) => {
        const req = httpRequest({ socketPath: d.socket, path: '/containers/create', method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': good.length, Host: 'localhost' }, agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (b: Buffer) => chunks.push(b));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        });
        req.on('error', () => resolve(undefined));
        const pieces = [text.slice(0, 10), text.slice(10, 30), text.slice(30)];
        const src = Readable.from((async function* () {
          for (const p of pieces) {
            if (p) yield p;
            await new Promise((t) => setTimeout(t, 100));
          }
        })());
        src.pipe(req, { end: false });
        src.on('end', () => (cut ? req.destroy() : req.end()));
      });
      requests++;
      if (!cut) {
        assert.equal(r?.status, 201, r?.body);
        created.push(JSON.parse(r!.body).Id);
      }
    }
  });

  it('query strings: filters of every shape and odd values, integers that are not', async () => {
    const d = daemon();
    const values: unknown[] = ['[[[', '', '5', 'a=b', 'x'.repeat(2000), '\u0000', '-1', 'true', '(a+)+$', '/', 'bridge', 'running', '80/tcp', 5, null, {}, [], { a: true }];
    const lists: [string, string[]][] = [
      ['/containers/json?all=1', ['id', 'name', 'label', 'status', 'ancestor', 'before', 'since', 'exited', 'health', 'volume', 'network', 'publish', 'expose', 'is-task', 'isolation', 'nope']],
      ['/images/json', ['dangling', 'label', 'before', 'since', 'reference', 'until', 'nope']],
      ['/networks', ['driver', 'id', 'label', 'name', 'scope', 'type', 'dangling', 'nope']],
    ];
    for (const [path, keys] of lists) {
      const raws: string[] = ['[]', '5', 'null', '"x"', '{', '{"a":', JSON.stringify({ [keys[0]!]: null })];
      for (const key of keys) {
        for (const v of values) {
          raws.push(JSON.stringify({ [key]: [v] }));
          raws.push(JSON.stringify({ [key]: v }));
          raws.push(JSON.stringify({ [key]: typeof v === 'string' ? { [v]: true } : v }));
        }
      }
      await pool(raws, 4, async (raw) => {
        requests++;
        const r = await d.request('GET', `${path}${path.includes('?') ? '&' : '?'}filters=${encodeURIComponent(raw)}`);
        assert.ok(r.status < 500, `seed ${SEED}: GET ${path} filters=${raw.slice(0, 100)}: ${r.status} ${r.text().slice(0, 300)}`);
      });
    }
    for (const q of ['limit=abc', 'limit=1e3', 'limit=-5', 'limit=99999999999999999999999', 'limit=', 'all=maybe', 'size=2']) {
      requests++;
      const r = await d.request('GET', `/containers/json?${q}`);
      assert.ok(r.status === 200 || r.status === 400, `GET /containers/json?${q}: ${r.status} ${r.text()}`);
    }
    for (const q of ['t=abc', 't=-1', 't=1.5', 't=99999999999999999999999', 'signal=NOPE', 'signal=999']) {
      requests++;
      const r = await d.request('POST', `/containers/nothing/stop?${q}`);
      assert.ok(r.status === 400 || r.status === 404, `POST stop?${q}: ${r.status} ${r.text()}`);
    }
  });

  it('afterwards: the same daemon answers, docker ps -a and docker inspect work for every container, accepted containers start without internal errors', async (t) => {
    const d = daemon();
    assert.equal(d.pid, pid, 'berthd did not restart');
    assert.ok(requests > 2000, `requests sent: ${requests}`);
    assert.equal((await d.request('GET', '/_ping')).status, 200);
    const ps = await d.docker(['ps', '-a', '--no-trunc', '--format', '{{.ID}}']);
    assert.equal(ps.code, 0, ps.stderr);
    const ids = ps.stdout.split('\n').filter(Boolean);
    for (const id of created) assert.ok(ids.includes(id), `${id} is listed`);
    for (let i = 0; i < ids.length; i += 100) {
      const insp = await d.docker(['inspect', ...ids.slice(i, i + 100)]);
      assert.equal(insp.code, 0, insp.stderr);
    }
    const list = await d.request('GET', '/containers/json?all=1&size=1');
    assert.equal(list.status, 200, list.text());
    // No request so far failed inside berthd, not even one whose client had gone (a cut slow body).
    const failed = d.logs().split('\n').filter((l) => l.includes('"msg":"request failed"'));
    assert.deepEqual(failed, []);
    // A sample of what create accepted is started: errors there may be dockerd's own 500s (the
    // runtime refusing), but never a JavaScript error's text.
    const sample = [...created];
    for (let i = sample.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [sample[i], sample[j]] = [sample[j]!, sample[i]!];
    }
    for (const id of sample.slice(0, Number(process.env.BERTH_FUZZ_STARTS ?? 25))) {
      const r = await d.request('POST', `/containers/${id}/start`);
      const text = r.text();
      assert.ok(!(r.status >= 500 && INTERNAL.test(text)), `seed ${SEED}: start ${id} (${JSON.stringify((await d.request('GET', `/containers/${id}/json`)).json().HostConfig).slice(0, 400)}): ${r.status} ${text}`);
    }
    assert.equal((await d.docker(['ps', '-a'])).code, 0);
    // Every accepted container and network can be removed again.
    await pool(created, 4, async (id) => {
      const r = await d.request('DELETE', `/containers/${id}?force=1`);
      assert.ok(r.status < 500, `remove ${id}: ${r.status} ${r.text()}`);
    });
    for (const n of networks) {
      const r = await d.request('DELETE', `/networks/${n}`);
      assert.ok(r.status < 500, `remove network ${n}: ${r.status} ${r.text()}`);
    }
    assert.equal(d.pid, pid, 'berthd did not restart');
    t.diagnostic(`${requests} requests; ${created.length} containers and ${networks.length} networks accepted`);
  });
});
