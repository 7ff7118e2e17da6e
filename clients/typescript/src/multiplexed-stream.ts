/**
 * Splits the multiplexed stdout/stderr stream of a container without a TTY (logs, attach) into
 * chunks as they arrive. Each frame is an 8-byte header (stream type, 3 zero bytes, big-endian
 * payload length) and the payload.
 */
import type { Readable } from 'node:stream';

export type OutputStream = 'stdout' | 'stderr';

export interface OutputChunk {
  stream: OutputStream;
  data: Buffer;
}

/** Thrown for a type-3 frame (an error the daemon reports in the stream) or an unknown type. */
export class MultiplexError extends Error {
  override name = 'MultiplexError';
}

const HEADER = 8;

/**
 * Yields one chunk per frame, or per piece of a frame as it arrives, so a large frame is never
 * held whole. A frame cut short by the end of the stream ends it quietly with what did arrive.
 */
export async function* demultiplex(body: Readable): AsyncGenerator<OutputChunk, void, undefined> {
  let header: Buffer = Buffer.alloc(0);
  let stream: OutputStream | 'system' = 'stdout';
  let remaining = 0; // payload bytes still owed by the current frame
  const systemMessage: Buffer[] = [];

  for await (const input of body as AsyncIterable<Buffer>) {
    let chunk = input;
    while (chunk.length) {
      if (remaining === 0) {
        const need = HEADER - header.length;
        header = Buffer.concat([header, chunk.subarray(0, need)]);
        chunk = chunk.subarray(need);
        if (header.length < HEADER) break;
        stream = streamOf(header[0]!);
        remaining = header.readUInt32BE(4);
        header = Buffer.alloc(0);
        if (stream === 'system' && remaining === 0) throw new MultiplexError('error from daemon in stream: ');
        continue;
      }
      const take = Math.min(remaining, chunk.length);
      const data = chunk.subarray(0, take);
      chunk = chunk.subarray(take);
      remaining -= take;
      if (stream === 'system') {
        systemMessage.push(data);
        if (remaining === 0) throw new MultiplexError(`error from daemon in stream: ${Buffer.concat(systemMessage).toString('utf8')}`);
      } else {
        yield { stream, data };
      }
    }
  }
}

function streamOf(type: number): OutputStream | 'system' {
  switch (type) {
    case 0: // stdin: readers treat it as stdout
    case 1:
      return 'stdout';
    case 2:
      return 'stderr';
    case 3:
      return 'system';
    default:
      throw new MultiplexError(`unrecognized stream: ${type}`);
  }
}
