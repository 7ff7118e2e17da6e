/**
 * conmon's ctl FIFO, in a container's bundle dir or an exec's dir: "<type> <h> <w>\n", type 1 =
 * resize the tty, type 2 = reopen the log file.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { conflict } from '../lib/errors.js';

/** Resizes the tty of the conmon whose ctl FIFO is in `dir`. */
export function resizeTty(dir: string, height: number, width: number): Promise<void> {
  return writeControl(join(dir, 'ctl'), `1 ${height} ${width}\n`);
}

/** Makes the conmon whose ctl FIFO is in `dir` reopen its log file. */
export function reopenLog(dir: string): Promise<void> {
  return writeControl(join(dir, 'ctl'), '2 0 0\n');
}

/**
 * One message to a conmon FIFO. Non-blocking open: with no conmon reading (container gone) it
 * fails at once with ENXIO instead of hanging.
 */
async function writeControl(fifo: string, message: string): Promise<void> {
  let fh;
  try {
    fh = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENXIO' || code === 'ENOENT') throw conflict('container is not running');
    throw err;
  }
  try {
    await fh.write(message);
  } finally {
    await fh.close();
  }
}
