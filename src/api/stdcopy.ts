/**
 * Docker's multiplexed stream: every write becomes one frame with an 8-byte header
 * (stream type, three zero bytes, big-endian payload length). Used iff the container has no TTY.
 */
export const enum StreamType {
  Stdin = 0,
  Stdout = 1,
  Stderr = 2,
  SystemErr = 3,
}

export function frameHeader(stream: StreamType, length: number): Buffer {
  const h = Buffer.allocUnsafe(8);
  h.writeUInt32BE(0, 0);
  h[0] = stream;
  h.writeUInt32BE(length, 4);
  return h;
}

/** Writes one payload as a frame (header and payload in one write when small, to keep records whole). */
export function writeFrame(out: NodeJS.WritableStream, stream: StreamType, payload: Buffer | string): boolean {
  const data = typeof payload === 'string' ? Buffer.from(payload) : payload;
  if (data.length === 0) return true;
  if (data.length <= 64 * 1024) return out.write(Buffer.concat([frameHeader(stream, data.length), data]));
  out.write(frameHeader(stream, data.length));
  return out.write(data);
}

/** The Content-Type dockerd uses for a hijacked or log stream at this API version. */
export function streamContentType(tty: boolean, version: string, versionAtLeast: (v: string, min: string) => boolean): string {
  return !tty && versionAtLeast(version, '1.42') ? 'application/vnd.docker.multiplexed-stream' : 'application/vnd.docker.raw-stream';
}
