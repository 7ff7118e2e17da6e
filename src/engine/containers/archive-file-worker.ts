/**
 * Worker thread of archive-file-writer.ts: creates the small files of a `docker cp` in batches
 * (create, write, owner, mode, times, close), so that the file system's work runs beside the main
 * thread's parsing of the request instead of after it. Names are reached as the main thread
 * reaches them: by one name under a directory descriptor of this process, with O_EXCL and
 * O_NOFOLLOW, so nothing a name could be swapped for is followed or overwritten.
 */
import { closeSync, constants, fchmodSync, fchownSync, futimesSync, openSync, writeSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

/** One file of a batch: its data is `data[offset, offset + length)`. */
export interface FileJob {
  dirFd: number;
  name: string;
  offset: number;
  length: number;
  /** Set: the owner to give the file (unset: it already is the creator's). */
  chown?: { uid: number; gid: number };
  mode: number;
  /** Seconds since the epoch. */
  mtime: number;
}

/** Main thread → worker: a batch and the buffer holding its files' data (transferred). */
export interface BatchIn {
  id: number;
  jobs: FileJob[];
  data: ArrayBuffer;
}

/** Worker → main thread: the buffer back, and the first failure if any (the jobs after it were not done). */
export interface BatchOut {
  id: number;
  data: ArrayBuffer;
  error?: { index: number; message: string; code?: string };
}

const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

function writeFile(job: FileJob, data: Buffer): void {
  const fd = openSync(`/proc/self/fd/${job.dirFd}/${job.name}`, CREATE, 0o600);
  try {
    const end = job.offset + job.length;
    for (let off = job.offset; off < end; ) off += writeSync(fd, data, off, end - off);
    if (job.chown) fchownSync(fd, job.chown.uid, job.chown.gid);
    fchmodSync(fd, job.mode);
    futimesSync(fd, job.mtime, job.mtime);
  } finally {
    closeSync(fd);
  }
}

parentPort?.on('message', (m: BatchIn) => {
  const data = Buffer.from(m.data);
  let error: BatchOut['error'];
  for (let i = 0; i < m.jobs.length; i++) {
    try {
      writeFile(m.jobs[i]!, data);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      // Not e.message: it names the /proc/self/fd path, not the container's.
      error = { index: i, message: e.code ? `${e.syscall ?? 'write'}: ${e.code}` : e.message, code: e.code };
      break;
    }
  }
  const out: BatchOut = { id: m.id, data: m.data, error };
  parentPort!.postMessage(out, [m.data]);
});
