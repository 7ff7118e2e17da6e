/** The `changes` of POST /commit: Dockerfile instructions applied to a config (no daemon needed). */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { applyChanges, parseGoDuration } from '../../src/engine/images/dockerfile-changes.js';
import { mergeConfig } from '../../src/engine/images/container-commit.js';
import { parsePs } from '../../src/engine/containers/container-top.js';
import { probeOf } from '../../src/engine/containers/healthcheck.js';
import type { ContainerRecord } from '../../src/engine/containers/container-model.js';
import { BerthError } from '../../src/lib/errors.js';

describe('applyChanges', () => {
  it('takes exec and shell forms of CMD and ENTRYPOINT; a new ENTRYPOINT drops the old CMD', () => {
    assert.deepEqual(applyChanges({}, ['CMD ["echo","hi"]']).Cmd, ['echo', 'hi']);
    assert.deepEqual(applyChanges({}, ['CMD echo hi there']).Cmd, ['/bin/sh', '-c', 'echo hi there']);
    assert.deepEqual(applyChanges({ Shell: ['/bin/bash', '-xc'] }, ['CMD ls']).Cmd, ['/bin/bash', '-xc', 'ls']);
    const e = applyChanges({ Cmd: ['old'] }, ['ENTRYPOINT ["/app"]']);
    assert.deepEqual(e.Entrypoint, ['/app']);
    assert.equal(e.Cmd, null);
    const both = applyChanges({}, ['CMD ["x"]', 'ENTRYPOINT ["/app"]']);
    assert.deepEqual(both.Cmd, ['x']);
  });

  it('sets ENV in both forms, replacing by key, and LABEL pairs with quotes', () => {
    const c = applyChanges({ Env: ['A=1', 'PATH=/bin'] }, ['ENV A=2 B="two words"', 'ENV C hello world', 'LABEL a=b "c d"="e f"']);
    assert.deepEqual(c.Env, ['A=2', 'PATH=/bin', 'B=two words', 'C=hello world']);
    assert.deepEqual(c.Labels, { a: 'b', 'c d': 'e f' });
  });

  it('expands EXPOSE ranges and protocols, resolves relative WORKDIR, takes VOLUME lists', () => {
    const c = applyChanges({ WorkingDir: '/srv' }, ['EXPOSE 80 53/udp 9000-9001', 'WORKDIR app/../www', 'VOLUME ["/data", "/logs"]', 'VOLUME /cache', 'USER nobody:nogroup', 'STOPSIGNAL SIGINT']);
    assert.deepEqual(Object.keys(c.ExposedPorts!).sort(), ['53/udp', '80/tcp', '9000/tcp', '9001/tcp']);
    assert.equal(c.WorkingDir, '/srv/www');
    assert.deepEqual(Object.keys(c.Volumes!).sort(), ['/cache', '/data', '/logs']);
    assert.equal(c.User, 'nobody:nogroup');
    assert.equal(c.StopSignal, 'SIGINT');
  });

  it('parses HEALTHCHECK flags and forms, and NONE', () => {
    const h = applyChanges({}, ['HEALTHCHECK --interval=1m30s --timeout=500ms --retries=5 CMD curl -f http://x/']).Healthcheck!;
    assert.deepEqual(h, { Interval: 90e9, Timeout: 5e8, Retries: 5, Test: ['CMD-SHELL', 'curl -f http://x/'] });
    assert.deepEqual(applyChanges({}, ['HEALTHCHECK CMD ["true"]']).Healthcheck, { Test: ['CMD', 'true'] });
    assert.deepEqual(applyChanges({}, ['HEALTHCHECK NONE']).Healthcheck, { Test: ['NONE'] });
  });

  it('joins continued lines, skips comments and blank lines, and accepts several instructions in one change', () => {
    const c = applyChanges({}, ['# a comment\nENV X=1 \\\n  Y=2\n\nCMD ["a"]']);
    assert.deepEqual(c.Env, ['X=1', 'Y=2']);
    assert.deepEqual(c.Cmd, ['a']);
  });

  it('refuses instructions that are not metadata, as dockerd words it', () => {
    for (const bad of ['RUN echo hi', 'FROM busybox', 'COPY a b', 'ADD a b', 'MAINTAINER me']) {
      assert.throws(() => applyChanges({}, [bad]), (err: unknown) => err instanceof BerthError && err.kind === 'invalid-argument' && /is not a valid change command/.test(err.message), bad);
    }
    assert.throws(() => applyChanges({}, ['EXPOSE eighty']), /invalid containerPort/);
    assert.throws(() => applyChanges({}, ['ONBUILD ONBUILD RUN x']), /Chaining ONBUILD/);
    assert.throws(() => applyChanges({}, ['HEALTHCHECK --interval=soon CMD true']), /invalid duration/);
  });

  it('does not modify its input', () => {
    const base = { Env: ['A=1'], Labels: { a: 'b' } };
    applyChanges(base, ['ENV A=2', 'LABEL a=c']);
    assert.deepEqual(base, { Env: ['A=1'], Labels: { a: 'b' } });
  });
});

describe('parseGoDuration', () => {
  it('reads Go durations', () => {
    assert.equal(parseGoDuration('0'), 0);
    assert.equal(parseGoDuration('1.5s'), 1.5e9);
    assert.equal(parseGoDuration('2h1m'), 2 * 3600e9 + 60e9);
    assert.equal(parseGoDuration('250us'), 250e3);
    assert.throws(() => parseGoDuration('10'), /invalid duration/);
    assert.throws(() => parseGoDuration('1x'), /invalid duration/);
  });
});

describe('mergeConfig', () => {
  it('fills gaps from the container config the way dockerd does', () => {
    const container = {
      User: 'app',
      Env: ['A=1', 'B=2'],
      Cmd: ['serve'],
      Entrypoint: ['/entry'],
      ExposedPorts: { '80/tcp': {} },
      Labels: { keep: '1', over: 'old' },
      WorkingDir: '/w',
      Healthcheck: { Test: ['CMD', 'true'], Interval: 5e9, Retries: 2 },
    };
    const m = mergeConfig({ Env: ['B=3'], Labels: { over: 'new' }, ExposedPorts: { '443/tcp': {} }, Healthcheck: { Interval: 1e9 } }, container);
    assert.equal(m.User, 'app');
    assert.deepEqual(m.Env, ['B=3', 'A=1']);
    assert.deepEqual(m.Cmd, ['serve']);
    assert.deepEqual(m.Entrypoint, ['/entry']);
    assert.deepEqual(Object.keys(m.ExposedPorts!).sort(), ['443/tcp', '80/tcp']);
    assert.deepEqual(m.Labels, { keep: '1', over: 'new' });
    assert.equal(m.WorkingDir, '/w');
    assert.deepEqual(m.Healthcheck, { Test: ['CMD', 'true'], Interval: 1e9, Retries: 2, Timeout: undefined, StartPeriod: undefined, StartInterval: undefined });
    // Cmd and Entrypoint travel together: a new Cmd alone keeps no old Entrypoint.
    const cmdOnly = mergeConfig({ Cmd: ['other'] }, container);
    assert.deepEqual(cmdOnly.Cmd, ['other']);
    assert.equal(cmdOnly.Entrypoint, undefined);
  });
});

describe('parsePs', () => {
  const out = ['UID PID PPID C STIME TTY TIME CMD', 'root 1 0 0 10:00 ? 00:00:01 /sbin/init splash', 'root 42 1 0 10:00 ? 00:00:00 sleep 1000', 'root 43 42 0 10:00 ? 00:00:00 sh -c echo  hi', ''].join('\n');

  it('keeps the rows of the given pids and joins the command column', () => {
    const r = parsePs(out, new Set([42, 43]));
    assert.deepEqual(r.Titles, ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD']);
    assert.deepEqual(r.Processes, [
      ['root', '42', '1', '0', '10:00', '?', '00:00:00', 'sleep 1000'],
      ['root', '43', '42', '0', '10:00', '?', '00:00:00', 'sh -c echo hi'],
    ]);
  });

  it('keeps thread rows ("-" pid) under an included process, and needs a PID column', () => {
    const threads = ['USER PID TID CMD', 'root 42 - sleep', 'root - 42 -', 'root 7 - other', 'root - 7 -'].join('\n');
    assert.deepEqual(parsePs(threads, new Set([42])).Processes, [['root', '42', '-', 'sleep'], ['root', '-', '42', '-']]);
    assert.throws(() => parsePs('USER CMD\nroot x\n', new Set()), /Couldn't find PID field/);
  });
});

describe('probeOf', () => {
  const record = (h: unknown, shell?: string[]) => ({ config: { Healthcheck: h, Shell: shell } }) as unknown as ContainerRecord;

  it('applies the defaults and the shell', () => {
    const p = probeOf(record({ Test: ['CMD-SHELL', 'exit 0'] }))!;
    assert.deepEqual(p, { test: ['/bin/sh', '-c', 'exit 0'], intervalMs: 30_000, timeoutMs: 30_000, startPeriodMs: 0, startIntervalMs: 5000, retries: 3 });
    assert.deepEqual(probeOf(record({ Test: ['CMD-SHELL', 'x'] }, ['/bin/ash', '-c']))!.test, ['/bin/ash', '-c', 'x']);
    assert.deepEqual(probeOf(record({ Test: ['CMD', 'true', 'a'], Interval: 2e9, Retries: 1 }))!.test, ['true', 'a']);
  });

  it('has none for NONE, no test, or no healthcheck', () => {
    assert.equal(probeOf(record({ Test: ['NONE'] })), undefined);
    assert.equal(probeOf(record({ Test: [] })), undefined);
    assert.equal(probeOf(record(undefined)), undefined);
  });
});
