/**
 * The container lifecycle through raw HTTP against a real berthd running real containers
 * (conmon + crun) on the busybox image from the test registry.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, existsSync, readdirSync } from 'node:fs';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import type { TestDaemon } from '../harness/daemon.js';
import { demuxChecked } from '../harness/multiplexed.js';

let image = '';

async function create(d: TestDaemon, body: Record<string, unknown>, name?: string): Promise<string> {
  const r = await d.request('POST', `/v1.47/containers/create${name ? `?name=${name}` : ''}`, { body: { Image: image, ...body } });
  assert.equal(r.status, 201, r.text());
  return r.json().Id as string;
}

async function run(d: TestDaemon, cmd: string[], extra: Record<string, unknown> = {}): Promise<string> {
  const id = await create(d, { Cmd: cmd, ...extra });
  const r = await d.request('POST', `/containers/${id}/start`);
  assert.equal(r.status, 204, r.text());
  return id;
}

async function waitExit(d: TestDaemon, id: string): Promise<number> {
  const r = await d.request('POST', `/containers/${id}/wait`);
  assert.equal(r.status, 200, r.text());
  return r.json().StatusCode as number;
}

async function inspect(d: TestDaemon, id: string) {
  const r = await d.request('GET', `/containers/${id}/json`);
  assert.equal(r.status, 200, r.text());
  return r.json();
}

describe('containers', () => {
const daemon = useDaemon();
const reg = useSeededRegistry('open');

before(async () => {
  const d = daemon();
  const { seeded } = reg();
  image = seeded.refs.busybox;
  const pull = await d.docker(['pull', image]);
  assert.equal(pull.code, 0, pull.stderr);
});

describe('create', () => {
  it('answers 201 with an id, names get a slash, and the image config is merged', async () => {
    const d = daemon();
    const r = await d.request('POST', '/containers/create?name=lc-create&unknownParam=1', {
      body: { Image: image, Cmd: ['true'], Env: ['A=1'], Labels: { l: 'v' }, SomeFutureField: { x: 1 }, HostConfig: { FutureThing: true } },
    });
    assert.equal(r.status, 201, r.text());
    const { Id, Warnings } = r.json();
    assert.match(Id, /^[a-f0-9]{64}$/);
    assert.deepEqual(Warnings, []);
    const c = await inspect(d, 'lc-create');
    assert.equal(c.Id, Id);
    assert.equal(c.Name, '/lc-create');
    assert.equal(c.State.Status, 'created');
    assert.equal(c.Config.Hostname, Id.slice(0, 12));
    assert.ok(c.Config.Env.includes('A=1'));
    assert.ok(c.Config.Env.some((e: string) => e.startsWith('PATH=')), 'PATH from the image');
    assert.deepEqual(c.Config.Cmd, ['true']);
    assert.equal(c.Image.startsWith('sha256:'), true);
    // short id prefix and the name with a slash both resolve
    assert.equal((await inspect(d, Id.slice(0, 10))).Id, Id);
    assert.equal((await inspect(d, '/lc-create')).Id, Id);
    const list = (await d.request('GET', '/containers/json')).json() as { Id: string }[];
    assert.ok(!list.some((x) => x.Id === Id), 'created containers are not listed without all');
    const all = (await d.request('GET', '/containers/json?all=1')).json() as { Id: string; Names: string[]; State: string; Status: string }[];
    const entry = all.find((x) => x.Id === Id)!;
    assert.deepEqual(entry.Names, ['/lc-create']);
    assert.equal(entry.State, 'created');
    assert.equal(entry.Status, 'Created');
  });

  it('refuses a taken name with 409, a missing image with 404, bad input with 400', async () => {
    const d = daemon();
    const id = await create(d, { Cmd: ['true'] }, 'lc-dup');
    const dup = await d.request('POST', '/containers/create?name=lc-dup', { body: { Image: image, Cmd: ['true'] } });
    assert.equal(dup.status, 409);
    assert.equal(dup.json().message, `Conflict. The container name "/lc-dup" is already in use by container "${id}". You have to remove (or rename) that container to be able to reuse that name.`);
    const missing = await d.request('POST', '/containers/create', { body: { Image: 'nosuchimage', Cmd: ['true'] } });
    assert.equal(missing.status, 404);
    assert.equal(missing.json().message, 'No such image: nosuchimage:latest');
    const bad = await d.request('POST', '/containers/create', { body: '{"Image": ', headers: { 'Content-Type': 'application/json' } });
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /invalid JSON/);
    const wrongType = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: 5 } });
    assert.equal(wrongType.status, 400);
    const unsupported = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { IOMaximumIOps: 300 } } });
    assert.equal(unsupported.status, 400);
    assert.equal(unsupported.json().message, 'invalid option: QoS maximum IOPs configuration is not supported on linux');
    const badName = await d.request('POST', '/containers/create?name=-bad', { body: { Image: image, Cmd: ['true'] } });
    assert.equal(badName.status, 400);
    const notFound = await d.request('GET', '/containers/nosuchcontainer/json');
    assert.equal(notFound.status, 404);
    assert.equal(notFound.json().message, 'No such container: nosuchcontainer');
  });
});

describe('run, observe, stop', () => {
  it('starts (204, then 304), runs, and reports a full State', async () => {
    const d = daemon();
    const id = await run(d, ['sleep', '60']);
    const again = await d.request('POST', `/containers/${id}/start`);
    assert.equal(again.status, 304);
    assert.equal(again.body.length, 0);
    const c = await inspect(d, id);
    assert.equal(c.State.Status, 'running');
    assert.equal(c.State.Running, true);
    assert.ok(c.State.Pid > 0);
    assert.notEqual(c.State.StartedAt, '0001-01-01T00:00:00Z');
    assert.ok(existsSync(`/proc/${c.State.Pid}`), 'the process exists on the host');
    const list = (await d.request('GET', '/containers/json')).json() as { Id: string; Status: string }[];
    assert.match(list.find((x) => x.Id === id)!.Status, /^Up /);
    const stop = await d.request('POST', `/containers/${id}/stop?t=1`);
    assert.equal(stop.status, 204);
    const after = await inspect(d, id);
    assert.equal(after.State.Status, 'exited');
    assert.equal(after.State.ExitCode, 137, 'sleep ignores nothing, but as pid 1 SIGTERM is ignored: killed after t');
    assert.equal((await d.request('POST', `/containers/${id}/stop`)).status, 304);
  });

  it('wait begun before start returns the exit code', async () => {
    const d = daemon();
    const id = await create(d, { Cmd: ['sh', '-c', 'exit 3'] });
    const waiting = d.request('POST', `/containers/${id}/wait?condition=next-exit`);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await d.request('POST', `/containers/${id}/start`)).status, 204);
    const w = await waiting;
    assert.equal(w.status, 200);
    assert.deepEqual(w.json(), { StatusCode: 3 });
    const bad = await d.request('POST', `/containers/${id}/wait?condition=bogus`);
    assert.equal(bad.status, 400);
    assert.equal(bad.json().message, 'invalid condition: "bogus"');
  });

  it('logs: frames without a TTY, raw with one, tail, timestamps, follow until exit', async () => {
    const d = daemon();
    const id = await run(d, ['sh', '-c', 'echo out1; echo err1 >&2; echo out2']);
    assert.equal(await waitExit(d, id), 0);
    const r = await d.request('GET', `/containers/${id}/logs?stdout=1&stderr=1`);
    assert.equal(r.status, 200);
    assert.deepEqual(demuxChecked(r.body), { stdout: 'out1\nout2\n', stderr: 'err1\n' });
    assert.equal(r.headers['content-type'], 'application/vnd.docker.multiplexed-stream');
    assert.deepEqual(demuxChecked((await d.request('GET', `/containers/${id}/logs?stderr=1`)).body), { stdout: '', stderr: 'err1\n' });
    assert.deepEqual(demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1&tail=1`)).body).stdout, 'out2\n');
    const ts = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1&timestamps=1`)).body).stdout;
    assert.match(ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z out1\n/);
    assert.equal((await d.request('GET', `/containers/${id}/logs`)).status, 400);

    const tty = await run(d, ['sh', '-c', 'echo tty-out; echo tty-err >&2'], { Tty: true });
    await waitExit(d, tty);
    const raw = await d.request('GET', `/containers/${tty}/logs?stdout=1&stderr=1`);
    assert.equal(raw.body.toString().replace(/\r/g, ''), 'tty-out\ntty-err\n');

    const follower = await run(d, ['sh', '-c', 'for i in 1 2 3; do echo line$i; sleep 0.3; done']);
    const followed = await d.request('GET', `/containers/${follower}/logs?stdout=1&follow=1`);
    assert.equal(demuxChecked(followed.body).stdout, 'line1\nline2\nline3\n', 'follow reads to the end and stops at exit');
  });

  it('kill takes names and numbers; a stopped container cannot be killed', async () => {
    const d = daemon();
    const id = await run(d, ['sh', '-c', 'trap "exit 42" USR1; while true; do sleep 0.1; done']);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await d.request('POST', `/containers/${id}/kill?signal=SIGUSR1`)).status, 204);
    assert.equal(await waitExit(d, id), 42);
    const id2 = await run(d, ['sleep', '60']);
    assert.equal((await d.request('POST', `/containers/${id2}/kill?signal=9`)).status, 204);
    assert.equal((await inspect(d, id2)).State.ExitCode, 137);
    const again = await d.request('POST', `/containers/${id2}/kill`);
    assert.equal(again.status, 409);
    assert.match(again.json().message, /is not running/);
    assert.equal((await d.request('POST', `/containers/${id2}/kill?signal=NOPE`)).status, 409);
  });

  it('restart, pause/unpause, rename', async () => {
    const d = daemon();
    const id = await run(d, ['sleep', '60'], {}); 
    const pid1 = (await inspect(d, id)).State.Pid;
    assert.equal((await d.request('POST', `/containers/${id}/restart?t=0`)).status, 204);
    const c = await inspect(d, id);
    assert.equal(c.State.Running, true);
    assert.notEqual(c.State.Pid, pid1);
    assert.equal((await d.request('POST', `/containers/${id}/pause`)).status, 204);
    const paused = await inspect(d, id);
    assert.equal(paused.State.Status, 'paused');
    assert.equal(paused.State.Paused, true);
    assert.match(readFileSync(`/proc/${paused.State.Pid}/status`, 'utf8'), /State:\s+[DST]/);
    assert.equal((await d.request('POST', `/containers/${id}/unpause`)).status, 204);
    assert.equal((await inspect(d, id)).State.Status, 'running');
    assert.equal((await d.request('POST', `/containers/${id}/rename?name=lc-renamed`)).status, 204);
    assert.equal((await inspect(d, 'lc-renamed')).Id, id);
    await create(d, { Cmd: ['true'] }, 'lc-taken');
    assert.equal((await d.request('POST', `/containers/${id}/rename?name=lc-taken`)).status, 409);
    await d.request('POST', `/containers/${id}/kill`);
  });

  it('remove: 409 while running, force kills, then 404', async () => {
    const d = daemon();
    await run(d, ['sleep', '60'], {}).then((id) => d.request('POST', `/containers/${id}/rename?name=lc-rm`));
    const r = await d.request('DELETE', '/containers/lc-rm');
    assert.equal(r.status, 409);
    assert.equal(r.json().message, 'cannot remove container "lc-rm": container is running: stop the container before removing or force remove');
    const pid = (await inspect(d, 'lc-rm')).State.Pid;
    assert.equal((await d.request('DELETE', '/containers/lc-rm?force=1')).status, 204);
    assert.equal((await d.request('GET', '/containers/lc-rm/json')).status, 404);
    assert.ok(!existsSync(`/proc/${pid}/status`) || !readFileSync(`/proc/${pid}/status`, 'utf8').includes('sleep'));
  });

  it('filters the list by label, status, exited, ancestor, name and id', async () => {
    const d = daemon();
    const a = await run(d, ['sh', '-c', 'exit 5'], { Labels: { team: 'x' } });
    await waitExit(d, a);
    const list = async (f: object) => ((await d.request('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify(f))}`)).json() as { Id: string }[]).map((x) => x.Id);
    assert.ok((await list({ label: ['team=x'] })).includes(a));
    assert.ok(!(await list({ label: ['team=y'] })).includes(a));
    assert.ok((await list({ status: ['exited'] })).includes(a));
    assert.ok((await list({ exited: ['5'] })).includes(a));
    assert.ok(!(await list({ exited: ['0'] })).includes(a));
    assert.ok((await list({ ancestor: [image] })).includes(a));
    assert.ok((await list({ id: [a.slice(0, 8)] })).includes(a));
    assert.equal((await d.request('GET', `/containers/json?filters=${encodeURIComponent('{"status":["bogus"]}')}`)).status, 400);
    assert.equal((await d.request('GET', `/containers/json?filters=${encodeURIComponent('{"nope":["x"]}')}`)).status, 400);
  });
});

describe('runtime defaults', () => {
  it('matches dockerd: hostname, /etc files, capabilities, masked paths, /dev/shm, read-only /sys, env', async () => {
    const d = daemon();
    const script = [
      'hostname', 'cat /etc/hostname', 'grep -c localhost /etc/hosts', 'grep CapEff /proc/self/status',
      'cat /proc/kcore 2>/dev/null | wc -c', 'touch /sys/x 2>/dev/null && echo sys-rw || echo sys-ro',
      "df -k /dev/shm | tail -1 | awk '{print $2}'", 'echo $HOSTNAME', 'echo $PATH', 'id -u', 'ls /proc/1/ns/pid >/dev/null && echo ok',
    ].join('; ');
    const id = await run(d, ['sh', '-c', script]);
    assert.equal(await waitExit(d, id), 0);
    const lines = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1&stderr=1`)).body).stdout.trim().split('\n');
    const short = id.slice(0, 12);
    assert.equal(lines[0], short);
    assert.equal(lines[1], short);
    assert.ok(Number(lines[2]) >= 1);
    assert.equal(lines[3], 'CapEff:\t00000000a80425fb', 'the default 14 capabilities');
    assert.equal(lines[4], '0', '/proc/kcore is masked');
    assert.equal(lines[5], 'sys-ro');
    assert.equal(lines[6], '65536', '/dev/shm is 64 MiB');
    assert.equal(lines[7], short);
    assert.equal(lines[8], '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    assert.equal(lines[9], '0');
  });

  it('resolves User by name in the image, applies CapDrop/CapAdd, Privileged, ReadonlyRootfs, Env, WorkingDir', async () => {
    const d = daemon();
    const id = await run(d, ['sh', '-c', 'id -u; id -g; pwd; echo $GREETING; grep CapEff /proc/self/status; touch /x 2>/dev/null && echo rw || echo ro'], {
      User: 'berth', WorkingDir: '/tmp', Env: ['GREETING=hi'], HostConfig: { CapDrop: ['ALL'], CapAdd: ['NET_BIND_SERVICE'], ReadonlyRootfs: true },
    });
    assert.equal(await waitExit(d, id), 0);
    const out = demuxChecked((await d.request('GET', `/containers/${id}/logs?stdout=1`)).body).stdout.trim().split('\n');
    assert.deepEqual(out.slice(0, 4), ['1000', '1000', '/tmp', 'hi']);
    assert.equal(out[4], 'CapEff:\t0000000000000000', 'a non-root user has no effective capabilities');
    assert.equal(out[5], 'ro');
    const priv = await run(d, ['sh', '-c', 'grep CapEff /proc/self/status'], { HostConfig: { Privileged: true } });
    await waitExit(d, priv);
    // Every capability the daemon itself holds (this host withholds CAP_SYS_RESOURCE), so CAP_SYS_ADMIN (bit 21) too.
    const privCaps = BigInt('0x' + /CapEff:\t([0-9a-f]+)/.exec(demuxChecked((await d.request('GET', `/containers/${priv}/logs?stdout=1`)).body).stdout)![1]!);
    const ownCaps = BigInt('0x' + /CapBnd:\t([0-9a-f]+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]!);
    assert.equal(privCaps & (1n << 21n), 1n << 21n);
    assert.equal(privCaps, ownCaps & privCaps);
    assert.ok(privCaps > 0xa80425fbn);
    const bad = await create(d, { Cmd: ['true'], User: 'nosuchuser' });
    const start = await d.request('POST', `/containers/${bad}/start`);
    assert.equal(start.status, 400);
    assert.match(start.json().message, /unable to find user nosuchuser/);
  });

  it('puts resource limits in the cgroup and runs under runc when asked', async () => {
    const d = daemon();
    const id = await run(d, ['sleep', '30'], { HostConfig: { Memory: 64 * 1024 * 1024, PidsLimit: 50 } });
    const c = await inspect(d, id);
    const cg = readFileSync(`/proc/${c.State.Pid}/cgroup`, 'utf8');
    const mem = /:memory:(.*)/.exec(cg)?.[1] ?? /^0::(.*)$/m.exec(cg)?.[1];
    assert.ok(mem, cg);
    const v1 = existsSync(`/sys/fs/cgroup/memory${mem}/memory.limit_in_bytes`);
    const limit = v1 ? readFileSync(`/sys/fs/cgroup/memory${mem}/memory.limit_in_bytes`, 'utf8').trim() : readFileSync(`/sys/fs/cgroup${mem}/memory.max`, 'utf8').trim();
    assert.equal(limit, String(64 * 1024 * 1024));
    await d.request('POST', `/containers/${id}/kill`);
    const r = await run(d, ['sh', '-c', 'echo via-runc'], { HostConfig: { Runtime: 'runc' } });
    assert.equal(await waitExit(d, r), 0);
    assert.equal((await inspect(d, r)).HostConfig.Runtime, 'runc');
    assert.equal(demuxChecked((await d.request('GET', `/containers/${r}/logs?stdout=1`)).body).stdout, 'via-runc\n');
    assert.equal((await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { Runtime: 'nope' } } })).status, 400);
  });
});

describe('restart policies and auto-remove', () => {
  it('on-failure:2 restarts twice then stays exited', async () => {
    const d = daemon();
    const id = await run(d, ['sh', '-c', 'exit 1'], { HostConfig: { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 2 } } });
    let c = await inspect(d, id);
    for (let i = 0; i < 50 && !(c.RestartCount === 2 && c.State.Status === 'exited'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      c = await inspect(d, id);
    }
    assert.equal(c.RestartCount, 2);
    assert.equal(c.State.Status, 'exited');
    assert.equal(c.State.ExitCode, 1);
  });

  it('always restarts until stopped', async () => {
    const d = daemon();
    const id = await run(d, ['sh', '-c', 'sleep 0.2'], { HostConfig: { RestartPolicy: { Name: 'always' } } });
    let c = await inspect(d, id);
    for (let i = 0; i < 50 && c.RestartCount < 1; i++) {
      await new Promise((r) => setTimeout(r, 100));
      c = await inspect(d, id);
    }
    assert.ok(c.RestartCount >= 1);
    assert.equal((await d.request('POST', `/containers/${id}/stop?t=0`)).status, 204);
    const count = (await inspect(d, id)).RestartCount;
    await new Promise((r) => setTimeout(r, 800));
    const after = await inspect(d, id);
    assert.equal(after.State.Status, 'exited');
    assert.equal(after.RestartCount, count, 'no restart after a stop');
  });

  it('a stop or a remove while the restart policy is starting the container again leaves it stopped', async () => {
    const d = daemon();
    // The first three runs exit; the policy starts each again after 100, 200, then 400 ms, and the
    // fourth run stays. The stop (or remove) lands at offsets around the 400 ms one (a window wide
    // enough to see on a loaded host), so some come while that start is under way (compose v1's
    // `down` hit this: the worker came back after its stop).
    const cmd = ['sh', '-c', 'n=$(($(cat /n 2>/dev/null || echo 0) + 1)); echo $n > /n; [ $n -gt 3 ] && exec sleep 60; exit 3'];
    const caught: string[] = [];
    const ids: string[] = [];
    let timed = 0;
    let attempts = 0;
    for (let offset = 250; offset <= 475; offset += 15) {
      attempts++;
      const id = await run(d, cmd, { HostConfig: { RestartPolicy: { Name: 'always' } } });
      ids.push(id);
      let c = await inspect(d, id);
      const until = Date.now() + 15_000;
      while (Date.now() < until && !(c.RestartCount === 3 && c.State.Restarting) && c.RestartCount < 4 && !(c.RestartCount === 3 && !c.State.Restarting)) {
        await new Promise((r) => setTimeout(r, 10));
        c = await inspect(d, id);
      }
      // A loaded host may show the container only once that start is over: this round is not timed.
      const waiting = c.State.Restarting && c.RestartCount === 3;
      if (waiting) {
        timed++;
        await new Promise((r) => setTimeout(r, offset));
      }
      const removing = offset % 2 === 1;
      const r = removing ? await d.request('DELETE', `/containers/${id}?force=1`) : await d.request('POST', `/containers/${id}/stop?t=0`);
      assert.ok([204, 304].includes(r.status), `${r.status} ${r.text()}`);
      await new Promise((r) => setTimeout(r, 300));
      const after = await d.request('GET', `/containers/${id}/json`);
      if (removing) {
        assert.equal(after.status, 404, `removed at +${offset} ms`);
      } else {
        const s = after.json().State;
        if (s.Status !== 'exited') caught.push(`stop at +${offset} ms: ${s.Status}`);
        await d.request('DELETE', `/containers/${id}?force=1`);
      }
    }
    assert.ok(timed >= attempts / 2, `only ${timed} of ${attempts} rounds saw the container waiting for its restart`);
    assert.deepEqual(caught, []);
    // No process of those containers (conmon names the container) outlives its removal.
    const left = readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((p) => {
      try {
        const line = readFileSync(`/proc/${p}/cmdline`, 'utf8');
        return ids.some((id) => line.includes(id));
      } catch {
        return false;
      }
    });
    assert.deepEqual(left, []);
  });

  it('AutoRemove removes the container and wait?condition=removed returns after removal', async () => {
    const d = daemon();
    const id = await create(d, { Cmd: ['sh', '-c', 'exit 4'], HostConfig: { AutoRemove: true } });
    const waiting = d.request('POST', `/containers/${id}/wait?condition=removed`);
    await new Promise((r) => setTimeout(r, 50));
    await d.request('POST', `/containers/${id}/start`);
    const w = await waiting;
    assert.equal(w.json().StatusCode, 4);
    assert.equal((await d.request('GET', `/containers/${id}/json`)).status, 404);
  });
});

describe('events', () => {
  it('streams create, start, die (with exitCode) and destroy', async () => {
    const d = daemon();
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = await run(d, ['sh', '-c', 'exit 2']);
    await waitExit(d, id);
    await d.request('DELETE', `/containers/${id}`);
    const until = Math.ceil(Date.now() / 1000) + 1;
    const r = await d.request('GET', `/events?since=${since}&until=${until}&filters=${encodeURIComponent(JSON.stringify({ container: [id] }))}`);
    const events = r.text().trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(events.map((e) => e.Action), ['create', 'start', 'die', 'destroy']);
    assert.equal(events[2].Actor.Attributes.exitCode, '2');
    assert.equal(events[0].Type, 'container');
    assert.ok(events.every((e) => e.Actor.ID === id && typeof e.timeNano === 'number'));
  });
});
});
