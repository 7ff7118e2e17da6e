/** Container operations against a real berthd running real containers from the seeded busybox. */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { BerthClient, ConflictError, ContainerError, NotFoundError, type OutputChunk } from '@berth-engine/client';
import { loadTestEnv, tempDir, uniqueName } from './test-env.js';

const env = loadTestEnv();
const busybox = `${env.registries.open.host}/busybox:latest`;
const c = new BerthClient({ host: env.dockerHost, configDir: tempDir() });
const LABEL = { 'berth-client-test': 'typescript' };

before(async () => {
  await c.images.pullAndWait(busybox);
});

/** Removes the container whatever state it is in; the test's own assertions come first. */
async function cleanup(id: string | undefined): Promise<void> {
  if (id) await c.containers.remove(id, { force: true }).catch(() => undefined);
}

function text(chunks: OutputChunk[], stream: 'stdout' | 'stderr'): string {
  return Buffer.concat(chunks.filter((x) => x.stream === stream).map((x) => x.data)).toString();
}

test('run in the foreground returns stdout', async () => {
  const out = await c.containers.run(busybox, ['echo', 'hello world'], { remove: true, config: { Labels: LABEL } });
  assert.equal(out.toString(), 'hello world\n');
});

test('run in the foreground pulls a missing image first', async () => {
  const ref = `${env.registries.open.host}/busybox:1.35`;
  await c.images.remove(ref, { force: true }).catch(() => undefined);
  const out = await c.containers.run(ref, ['echo', 'pulled'], { remove: true, config: { Labels: LABEL } });
  assert.equal(out.toString(), 'pulled\n');
});

test('a non-zero exit raises ContainerError with the exit code and stderr', async () => {
  const name = uniqueName('fail');
  try {
    await assert.rejects(
      c.containers.run(busybox, ['sh', '-c', 'echo to-out; echo to-err >&2; exit 3'], { name, config: { Labels: LABEL } }),
      (e: Error) => e instanceof ContainerError && e.exitCode === 3 && e.stderr.toString() === 'to-err\n',
    );
  } finally {
    await cleanup(name);
  }
});

test('stdout and stderr come apart from the multiplexed log stream', async () => {
  let id: string | undefined;
  try {
    id = (await c.containers.create({ Image: busybox, Cmd: ['sh', '-c', 'echo out1; echo err1 >&2; echo out2'], Labels: LABEL })).Id;
    const w = await c.containers.beginWait(id, { condition: 'next-exit' });
    await c.containers.start(id);
    assert.equal((await w.result).StatusCode, 0);
    const chunks: OutputChunk[] = [];
    for await (const chunk of c.containers.logs(id)) chunks.push(chunk);
    assert.equal(text(chunks, 'stdout'), 'out1\nout2\n');
    assert.equal(text(chunks, 'stderr'), 'err1\n');
    const onlyErr: OutputChunk[] = [];
    for await (const chunk of c.containers.logs(id, { stdout: false })) onlyErr.push(chunk);
    assert.equal(text(onlyErr, 'stdout'), '');
    assert.equal(text(onlyErr, 'stderr'), 'err1\n');
  } finally {
    await cleanup(id);
  }
});

test('with a TTY the log is raw and arrives as stdout', async () => {
  let id: string | undefined;
  try {
    id = (await c.containers.create({ Image: busybox, Cmd: ['sh', '-c', 'echo tty-out; echo tty-err >&2'], Tty: true, Labels: LABEL })).Id;
    await c.containers.start(id);
    await c.containers.wait(id);
    const chunks: OutputChunk[] = [];
    for await (const chunk of c.containers.logs(id)) chunks.push(chunk);
    assert.ok(chunks.every((x) => x.stream === 'stdout'));
    const out = text(chunks, 'stdout').replace(/\r\n/g, '\n');
    assert.match(out, /tty-out\n/);
    assert.match(out, /tty-err\n/);
  } finally {
    await cleanup(id);
  }
});

test('following logs yields lines while the container still runs', async () => {
  let id: string | undefined;
  try {
    const container = await c.containers.run(busybox, ['sh', '-c', 'echo first; sleep 2; echo second'], { detach: true, config: { Labels: LABEL } });
    id = container.id;
    const started = Date.now();
    const arrivals: Array<[string, number]> = [];
    for await (const chunk of container.logs({ follow: true })) arrivals.push([chunk.data.toString(), Date.now() - started]);
    const all = arrivals.map(([s]) => s).join('');
    assert.equal(all, 'first\nsecond\n');
    const firstAt = arrivals.find(([s]) => s.includes('first'))![1];
    const secondAt = arrivals.find(([s]) => s.includes('second'))![1];
    assert.ok(secondAt - firstAt >= 1000, `"first" arrived before "second" was written (${firstAt} ms vs ${secondAt} ms)`);
  } finally {
    await cleanup(id);
  }
});

test('background run, list, inspect, stop, kill, remove, and typed errors', async () => {
  const name = uniqueName('bg');
  try {
    const container = await c.containers.run(busybox, ['sleep', '300'], { detach: true, name, config: { Labels: { ...LABEL, run: name } } });
    const listed = await c.containers.list({ filters: { label: [`run=${name}`] } });
    assert.equal(listed.length, 1);
    assert.equal(listed[0]!.Id, container.id);
    assert.deepEqual(listed[0]!.Names, [`/${name}`]);
    assert.equal(listed[0]!.State, 'running');
    const info = await container.inspect();
    assert.equal(info.State.Running, true);
    assert.equal(info.Name, `/${name}`);

    await assert.rejects(container.remove(), (e: Error) => e instanceof ConflictError && e.message.includes('stop the container before removing'));
    await assert.rejects(
      c.containers.create({ Image: busybox, Cmd: ['true'] }, { name }),
      (e: Error) => e instanceof ConflictError && e.message.includes('is already in use'),
    );

    await container.stop({ timeout: 1 });
    const stopped = await container.inspect();
    assert.equal(stopped.State.Running, false);
    assert.equal((await c.containers.list({ filters: { label: [`run=${name}`] } })).length, 0);
    assert.equal((await c.containers.list({ all: true, filters: { label: [`run=${name}`] } })).length, 1);

    await container.start();
    await container.kill('SIGKILL');
    assert.equal((await container.wait()).StatusCode, 137);

    await container.remove();
    await assert.rejects(c.containers.inspect(name), (e: Error) => e instanceof NotFoundError && e.message === `No such container: ${name}`);
  } finally {
    await cleanup(name);
  }
});

test('wait for a container that does not exist is a NotFoundError', async () => {
  const ghost = uniqueName('ghost');
  await assert.rejects(c.containers.wait(ghost), (e: Error) => e instanceof NotFoundError && e.message === `No such container: ${ghost}`);
});

test.after(() => c.close());
