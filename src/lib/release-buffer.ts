/**
 * Gives a Buffer's memory back at once instead of at some later GC. Node's HTTP parser copies each
 * piece of a request body into a Buffer of its own (up to 64 KiB); V8 frees one only after a
 * scavenge has found it dead, and a daemon with a small young generation scavenges rarely while an
 * upload streams through. So a 20 MiB build context leaves ~20 MiB of dead chunks behind: each new
 * chunk lands on fresh pages (page faults, cold caches), and V8 counts the dead bytes as external
 * memory that starts a full mark-compact of the daemon's heap about once per upload (5-15 ms here).
 *
 * Transferring an ArrayBuffer detaches it (every view of it reads as empty from then on) and frees
 * its memory with the message; a message posted to a closed port is dropped as soon as it is made,
 * so the memory is returned right away and the next chunk reuses the same block.
 */
import { MessageChannel } from 'node:worker_threads';

let sink: MessageChannel['port1'] | undefined;

/**
 * Frees the memory of each of `bufs` that spans its whole ArrayBuffer (a body chunk does), in one
 * message; leaves slices of larger ones alone (pooled small Buffers, subarrays). The caller must hold
 * the only use of them: each freed Buffer, and any other view of the same memory, reads as empty
 * afterwards.
 */
export function releaseBuffers(bufs: readonly Buffer[]): void {
  const whole: ArrayBuffer[] = [];
  for (const buf of bufs) {
    const ab = buf.buffer;
    if (buf.byteOffset === 0 && buf.byteLength === ab.byteLength && ab instanceof ArrayBuffer && ab.byteLength > 0 && !whole.includes(ab)) whole.push(ab);
  }
  if (whole.length === 0) return;
  if (!sink) {
    const ch = new MessageChannel();
    ch.port1.close();
    ch.port2.close();
    sink = ch.port1;
  }
  sink.postMessage(null, whole);
}
