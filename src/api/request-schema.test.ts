import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { apiOperation } from './request-schema.js';
import { errorText } from './http-errors.js';
import { BerthError } from '../lib/errors.js';
import { repairToDefinition } from '../lib/engine-api-schema.js';

const REPO = resolve(fileURLToPath(import.meta.url), '../../../..');

function refusal(fn: () => void): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof BerthError && err.kind === 'invalid-argument', String(err));
    return err.message;
  }
  assert.fail('accepted');
}

describe('request schema (no daemon)', () => {
  const create = apiOperation('POST', '/containers/create')!;

  it('finds operations by method and path template, with any parameter names', () => {
    assert.ok(apiOperation('POST', '/containers/:id/exec'));
    assert.ok(apiOperation('POST', '/networks/:name/connect'));
    assert.equal(apiOperation('GET', '/_ping'), undefined);
    assert.equal(apiOperation('GET', '/containers/:id/json'), undefined);
  });

  it('refuses wrong types, Go integer overflows and unknown enum values, naming the field as Go does', () => {
    assert.equal(refusal(() => create.checkBody({ HostConfig: { NetworkMode: 5 } })), 'json: cannot unmarshal number into Go struct field HostConfig.NetworkMode of type string');
    assert.equal(refusal(() => create.checkBody({ HostConfig: { Memory: 2 ** 63 } })), 'json: cannot unmarshal number 9223372036854776000 into Go struct field HostConfig.Memory of type int64');
    assert.match(refusal(() => create.checkBody({ HostConfig: { Mounts: [{ Type: 'nfs' }] } })), /^invalid value "nfs" for HostConfig\.Mounts\[0\]\.Type: must be one of "bind", /);
    assert.match(refusal(() => create.checkBody({ ExposedPorts: [] })), /ExposedPorts of type map\[string\]/);
    assert.match(refusal(() => apiOperation('POST', '/networks/create')!.checkBody({ Name: 'n', IPAM: { Config: [{ Subnet: 5 }] } })), /IPAM\.Config\[0\]\.Subnet of type string/);
  });

  it('takes what Go takes: unknown fields, nulls, a string for a StrSlice, -1 swappiness; nulls become what Go decodes', () => {
    const body = {
      Cmd: 'sh',
      Entrypoint: null,
      Unknown: { deep: [1] },
      Labels: { a: null },
      HostConfig: { NetworkMode: null, CapAdd: 'NET_ADMIN', Dns: [null], MemorySwappiness: -1, Ulimits: [null], LowerCase: 1 },
    };
    create.checkBody(body);
    assert.deepEqual(body, { Cmd: ['sh'], Unknown: { deep: [1] }, Labels: { a: '' }, HostConfig: { CapAdd: ['NET_ADMIN'], Dns: [''], MemorySwappiness: -1, Ulimits: [{}], LowerCase: 1 } });
    const net = { Name: 'n', IPAM: { Config: [null] } };
    apiOperation('POST', '/networks/create')!.checkBody(net);
    assert.deepEqual(net.IPAM.Config, [{}]);
  });

  it('matches struct fields in any case, as Go does (the later of two keys for one field wins); map keys stay as sent', () => {
    const body: Record<string, unknown> = { image: 'busybox', CMD: 'true', hostconfig: { networkmode: 'none', memory: 5 }, labels: { Key: 'v', key: 'w' } };
    create.checkBody(body);
    assert.deepEqual(body, { Image: 'busybox', Cmd: ['true'], HostConfig: { NetworkMode: 'none', Memory: 5 }, Labels: { Key: 'v', key: 'w' } });
    const twice: Record<string, unknown> = { Image: 'a', image: 'b' };
    create.checkBody(twice);
    assert.deepEqual(twice, { Image: 'b' });
    const exactLast: Record<string, unknown> = { image: 'b', Image: 'a' };
    create.checkBody(exactLast);
    assert.deepEqual(exactLast, { Image: 'a' });
    assert.match(refusal(() => create.checkBody({ hostconfig: { networkmode: 5 } })), /HostConfig\.NetworkMode/);
    const svc: Record<string, unknown> = { Name: 's', rollbackconfig: { parallelism: 2, FAILUREACTION: 'pause' } };
    apiOperation('POST', '/services/create')!.checkBody(svc);
    assert.deepEqual(svc, { Name: 's', RollbackConfig: { Parallelism: 2, FailureAction: 'pause' } });
  });

  it('checks typed query parameters only', () => {
    const list = apiOperation('GET', '/containers/json')!;
    assert.match(refusal(() => list.checkQuery(new URLSearchParams('limit=ten'))), /limit/);
    list.checkQuery(new URLSearchParams('limit=&all=maybe&filters=%7B'));
    const logs = apiOperation('GET', '/containers/:id/logs');
    assert.ok(logs === undefined || !logs.checksQuery, 'since/until are timestamps, not integers');
    assert.match(refusal(() => apiOperation('POST', '/containers/:id/wait')!.checkQuery(new URLSearchParams('condition=soon'))), /condition/);
  });

  it('repairs a stored value by dropping what does not fit', () => {
    const hc: Record<string, unknown> = { NetworkMode: 5, Binds: ['/a:/b', 7], Memory: -(2 ** 63), RestartPolicy: { Name: 'no' } };
    assert.deepEqual(repairToDefinition('HostConfig', hc).sort(), ['/Binds/1', '/Memory', '/NetworkMode']);
    assert.deepEqual(hc, { Binds: ['/a:/b'], RestartPolicy: { Name: 'no' } });
  });

  it('answers JavaScript engine errors without their text', () => {
    assert.equal(errorText(new TypeError('c.hostConfig.NetworkMode.startsWith is not a function')), 'internal error in berthd (details are in its log)');
    assert.equal(errorText(new BerthError('conflict', 'already exists')), 'already exists');
    assert.equal(errorText(new Error('ENOENT: no such file')), 'ENOENT: no such file');
  });

  const spec = ['..', '../..'].map((up) => join(REPO, up, 'shared/reference/docker-engine-api-v1.55.yaml')).find((p) => existsSync(p));
  it('the committed schema is what the generator makes of the spec', { skip: !spec && 'no ../shared/reference' }, () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-schema-'));
    try {
      const out = join(dir, 'schema.json');
      execFileSync(process.execPath, [join(REPO, 'scripts/gen-api-schema.mjs'), spec!, out], { cwd: REPO, stdio: 'pipe' });
      assert.equal(readFileSync(out, 'utf8'), readFileSync(join(REPO, 'generated/engine-api-schema.json'), 'utf8'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
