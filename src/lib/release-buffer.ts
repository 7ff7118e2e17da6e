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
 * Frees `buf`'s memory now when `buf` spans its whole ArrayBuffer (a body chunk does); does nothing
 * for a slice of a larger one (pooled small Buffers, subarrays). The caller must hold the only use of
 * it: `buf`, and any other view of the same memory, reads as empty afterwards.
 */
export function releaseBuffer(buf: Buffer): void {
  const ab = buf.buffer;
  if (buf.byteOffset !== 0 || buf.byteLength !== ab.byteLength || !(ab instanceof ArrayBuffer) || ab.byteLength === 0) return;
  if (!sink) {
    const ch = new MessageChannel();
    ch.port1.close();
    ch.port2.close();
    sink = ch.port1;
  }
  sink.postMessage(null, [ab]);
}
