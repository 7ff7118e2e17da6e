/**
 * Terminals, driven the way a person drives them: the real docker CLI inside tmux. `run -it` gets
 * the window's size before its first output, follows resizes, detaches on ctrl-p ctrl-q leaving
 * the shell running, `docker attach` and `docker exec -it` work, and exit codes come back.
 */
import { before, after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { useDaemon, useSeededRegistry } from '../harness/index.js';
import { Terminal, dockerEnv } from './support.js';

const haveTmux = (() => {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('docker run -it, attach and exec -it in a real terminal', { skip: !haveTmux && 'tmux is not installed' }, () => {
  const daemon = useDaemon();
  const reg = useSeededRegistry('open');
  let image = '';
  const terminals: Terminal[] = [];

  before(async () => {
    image = reg().seeded.refs.busybox;
    const r = await daemon().docker(['pull', '-q', image]);
    assert.equal(r.code, 0, r.stderr);
  });
  after(async () => {
    for (const t of terminals) await t.close();
  });

  const open = async (args: string, cols = 200, rows = 50) => {
    const t = await Terminal.open(`docker ${args}`, dockerEnv(daemon()), cols, rows);
    terminals.push(t);
    return t;
  };

  it('run -it: a shell with the window size from the start, resize, exit code', async () => {
    // The first thing the shell prints is the size it was started with (ConsoleSize at create).
    const t = await open(`run -it --rm ${image} sh -c 'stty size; exec sh'`, 200, 50);
    await t.waitFor(/^50 200$/m);
    await t.type('echo $((6*7))');
    await t.keys('Enter');
    await t.waitFor(/^42$/m);
    await t.type('tty');
    await t.keys('Enter');
    await t.waitFor(/^\/dev\/pts\/\d+$/m);
    await t.resize(120, 40);
    await new Promise((r) => setTimeout(r, 300)); // the CLI forwards SIGWINCH as /resize
    await t.type('stty size');
    await t.keys('Enter');
    await t.waitFor(/^40 120$/m);
    await t.type('exit 5');
    await t.keys('Enter');
    await t.waitFor(/\[exit 5\]/);
  });

  it('detach keys leave the container running; docker attach picks the shell up again', async () => {
    const name = `tty-${randomBytes(4).toString('hex')}`;
    const t = await open(`run -it --name ${name} ${image} sh`);
    await t.waitFor(/^\/ #/m);
    await t.type('export MARK=kept');
    await t.keys('Enter');
    await t.keys('C-p', 'C-q');
    await t.waitFor(/\[exit 0\]/);
    const ps = await daemon().docker(['inspect', '-f', '{{.State.Status}}', name]);
    assert.equal(ps.stdout.trim(), 'running');

    const a = await open(`attach ${name}`, 100, 30);
    await a.type('echo mark=$MARK');
    await a.keys('Enter');
    await a.waitFor(/^mark=kept$/m);
    await a.type('exit 7');
    await a.keys('Enter');
    await a.waitFor(/\[exit 7\]/);
    const st = await daemon().docker(['inspect', '-f', '{{.State.Status}} {{.State.ExitCode}}', name]);
    assert.equal(st.stdout.trim(), 'exited 7');
    await daemon().docker(['rm', '-f', name]);
  });

  it('attach --detach-keys: a custom sequence detaches', async () => {
    const name = `dk-${randomBytes(4).toString('hex')}`;
    const r = await daemon().docker(['run', '-dit', '--name', name, image, 'sh']);
    assert.equal(r.code, 0, r.stderr);
    const a = await open(`attach --detach-keys=ctrl-x,x ${name}`);
    await a.type('echo one');
    await a.keys('Enter');
    await a.waitFor(/^one$/m);
    await a.keys('C-x');
    await a.type('x');
    await a.waitFor(/read escape sequence\s+\[exit \d+\]/);
    const st = await daemon().docker(['inspect', '-f', '{{.State.Status}}', name]);
    assert.equal(st.stdout.trim(), 'running');
    await daemon().docker(['rm', '-f', name]);
  });

  it('exec -it: a second shell with its own size; exec exit code', async () => {
    const name = `ex-${randomBytes(4).toString('hex')}`;
    const r = await daemon().docker(['run', '-d', '--name', name, image, 'sleep', '300']);
    assert.equal(r.code, 0, r.stderr);
    // crun sets an exec's terminal size just after the process started: give it a moment.
    const t = await open(`exec -it ${name} sh -c 'sleep 0.2; stty size; exec sh'`, 150, 30);
    await t.waitFor(/^30 150$/m);
    await t.type('echo in-exec; exit 4');
    await t.keys('Enter');
    await t.waitFor(/^in-exec$/m);
    await t.waitFor(/\[exit 4\]/);
    // The container keeps running after the exec ends.
    const st = await daemon().docker(['inspect', '-f', '{{.State.Status}}', name]);
    assert.equal(st.stdout.trim(), 'running');
    await daemon().docker(['rm', '-f', name]);
  });

  it('exec -it follows a resize', async () => {
    const name = `exr-${randomBytes(4).toString('hex')}`;
    const r = await daemon().docker(['run', '-d', '--name', name, image, 'sleep', '300']);
    assert.equal(r.code, 0, r.stderr);
    const t = await open(`exec -it ${name} sh`, 100, 30);
    await t.waitFor(/^\/ #/m);
    await t.resize(90, 25);
    await new Promise((r) => setTimeout(r, 300));
    await t.type('stty size');
    await t.keys('Enter');
    await t.waitFor(/^25 90$/m);
    await t.type('exit');
    await t.keys('Enter');
    await t.waitFor(/\[exit 0\]/);
    await daemon().docker(['rm', '-f', name]);
  });
});
