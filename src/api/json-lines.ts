/**
 * Streams JSON records the way dockerd does for pulls and pushes: status 200 is sent with the first
 * record (so an error before it can still be a proper status code), each record is one write
 * ending in \r\n, and the response is flushed as it goes.
 */
import type { ServerResponse } from 'node:http';

export class JsonLineWriter {
  started = false;
  constructor(private readonly res: ServerResponse) {}

  write(record: unknown): void {
    if (this.res.destroyed) return;
    if (!this.started) {
      this.started = true;
      this.res.writeHead(200, { 'Content-Type': 'application/json' });
    }
    this.res.write(JSON.stringify(record) + '\r\n');
  }

  end(): void {
    if (!this.started) {
      this.started = true;
      this.res.writeHead(200, { 'Content-Type': 'application/json' });
    }
    this.res.end();
  }
}
