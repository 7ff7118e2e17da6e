/**
 * rtnetlink sockets in any network namespace, through libc (the koffi FFI): what `ip` does for a
 * container's interfaces, without a process. A socket is made inside its namespace (ns-calls.ts);
 * the requests go out on libuv's thread pool: the kernel handles them inside send(2), under the
 * host-wide RTNL lock that others (a namespace being torn down) can hold for milliseconds, which must
 * not stall the event loop.
 */
import { errnoName, libcBinding } from '../lib/libc.js';
import { decodeAnswers, decodeMessages, encodeRequests, type NetlinkAnswer, type NetlinkMessage, type NetlinkRequest } from './netlink-messages.js';
import { inNamespace, nsCalls } from './ns-calls.js';

const AF_NETLINK = 16;
const SOCK_RAW = 3;
const SOCK_CLOEXEC = 0o2000000;
const NETLINK_ROUTE = 0;
const SOL_NETLINK = 270;
const NETLINK_CAP_ACK = 10;
const NETLINK_EXT_ACK = 11;
const MSG_DONTWAIT = 0x40;

type AsyncCall = { async: (...args: unknown[]) => void };

interface Calls {
  socket: (domain: number, type: number, protocol: number) => number;
  setsockopt: (fd: number, level: number, name: number, value: Buffer, len: number) => number;
  send: AsyncCall;
  recv: ((fd: number, buf: Buffer, len: number, flags: number) => number) & AsyncCall;
  close: (fd: number) => number;
  errno: () => number;
}

const socketCalls = libcBinding<Calls>((c) => ({
  socket: c.lib.func('int socket(int domain, int type, int protocol)'),
  setsockopt: c.lib.func('int setsockopt(int fd, int level, int name, const void *value, uint32_t len)'),
  send: c.lib.func('intptr_t send(int fd, const void *buf, size_t len, int flags)') as AsyncCall,
  recv: c.lib.func('intptr_t recv(int fd, _Out_ void *buf, size_t len, int flags)') as Calls['recv'],
  close: c.lib.func('int close(int fd)'),
  errno: () => c.koffi.errno(),
}), 'rtnetlink not callable through libc: interfaces are set up by ip');

/** The socket calls, where namespaces can be entered too (a socket is made inside one). */
function libc(): Calls | null {
  return nsCalls() ? socketCalls() : null;
}

/** Whether sockets can be made here (libc through koffi); otherwise callers use `ip`. */
export function netlinkAvailable(): boolean {
  return libc() !== null;
}

/** A reply other than an acknowledgement (a GETLINK's link): the position of its request, the link's index. */
export interface NetlinkReply {
  request: number;
  index?: number;
}

export class NetlinkError extends Error {
  constructor(
    message: string,
    /** The errno name (EEXIST...), when the kernel gave one. */
    readonly code?: string,
  ) {
    super(message);
  }
}

export class NetlinkSocket {
  readonly #c: Calls;
  #fd: number;
  #seq = 1;
  #closed = false;
  /**
   * Requests and dumps under way. close() leaves the fd open until they end: their send and recv may
   * still be queued on libuv's pool, and run on whatever the fd's number names by then (another
   * socket, a file) if it were closed and reused meanwhile.
   */
  #busy = 0;

  private constructor(c: Calls, fd: number) {
    this.#c = c;
    this.#fd = fd;
  }

  /** A socket in the namespace of `nsPath`, or berthd's own without one (or, from createNamespace's callback, the new one). */
  static open(nsPath?: string): NetlinkSocket {
    const c = libc();
    if (!c) throw new NetlinkError('rtnetlink is not available');
    const make = () => c.socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    const fd = nsPath ? inNamespace(nsPath, make) : make();
    if (fd < 0) throw new NetlinkError(`netlink socket: ${errnoName(c.errno())}`);
    const one = Buffer.alloc(4);
    one.writeInt32LE(1);
    // Error answers carry the kernel's explanation, and not the whole request back.
    c.setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, one, 4);
    c.setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, one, 4);
    return new NetlinkSocket(c, fd);
  }

  /**
   * Sends the requests in one datagram (the kernel handles them in order, a failed one not stopping the
   * rest) and resolves with their answers once all are acknowledged; rejects with the first error.
   */
  async request(reqs: readonly NetlinkRequest[]): Promise<NetlinkReply[]> {
    if (this.#closed) throw new NetlinkError('netlink socket closed');
    if (reqs.length === 0) return [];
    this.#busy++;
    try {
      return await this.#request(reqs);
    } finally {
      this.#done();
    }
  }

  async #request(reqs: readonly NetlinkRequest[]): Promise<NetlinkReply[]> {
    const first = this.#seq;
    this.#seq += reqs.length;
    const buf = encodeRequests(reqs, first);
    const sent = await new Promise<number>((resolve, reject) => this.#c.send.async(this.#fd, buf, buf.length, 0, (err: unknown, n: number) => (err ? reject(err) : resolve(n))));
    if (sent !== buf.length) throw new NetlinkError(`netlink send failed (${sent})`);
    // The kernel answered inside send(2): the answers wait in the socket already.
    const answers: NetlinkAnswer[] = [];
    const rb = Buffer.alloc(32 * 1024);
    let acked = 0;
    while (acked < reqs.length) {
      let n = this.#c.recv(this.#fd, rb, rb.length, MSG_DONTWAIT);
      if (n < 0) n = await new Promise<number>((resolve, reject) => this.#c.recv.async(this.#fd, rb, rb.length, 0, (err: unknown, r: number) => (err ? reject(err) : resolve(r))));
      if (n <= 0) throw new NetlinkError(`netlink receive failed (${n})`);
      for (const a of decodeAnswers(rb.subarray(0, n))) {
        if (a.seq < first || a.seq >= first + reqs.length) continue;
        answers.push(a);
        if (a.error !== undefined) acked++;
      }
    }
    const failed = answers.find((a) => a.error !== undefined && a.error < 0);
    if (failed) {
      const code = errnoName(-failed.error!);
      throw new NetlinkError(`${reqs[failed.seq - first]!.what}: ${code}${failed.message ? ` (${failed.message})` : ''}`, code);
    }
    return answers.filter((a) => a.error === undefined).map((a) => ({ request: a.seq - first, index: a.index }));
  }

  /** A dump's messages (e.g. every link), read to its end. */
  async dump(req: NetlinkRequest): Promise<NetlinkMessage[]> {
    if (this.#closed) throw new NetlinkError('netlink socket closed');
    this.#busy++;
    try {
      return await this.#dump(req);
    } finally {
      this.#done();
    }
  }

  async #dump(req: NetlinkRequest): Promise<NetlinkMessage[]> {
    const seq = this.#seq++;
    const buf = encodeRequests([{ ...req, dump: true }], seq);
    const sent = await new Promise<number>((resolve, reject) => this.#c.send.async(this.#fd, buf, buf.length, 0, (err: unknown, n: number) => (err ? reject(err) : resolve(n))));
    if (sent !== buf.length) throw new NetlinkError(`netlink send failed (${sent})`);
    const out: NetlinkMessage[] = [];
    const rb = Buffer.alloc(64 * 1024);
    for (;;) {
      // The kernel makes each part of a dump as the previous one is read: on the pool, since some
      // dumps take the RTNL lock.
      const n = await new Promise<number>((resolve, reject) => this.#c.recv.async(this.#fd, rb, rb.length, 0, (err: unknown, r: number) => (err ? reject(err) : resolve(r))));
      if (n <= 0) throw new NetlinkError(`netlink receive failed (${n})`);
      const { messages, done } = decodeMessages(rb.subarray(0, n));
      for (const m of messages) out.push({ type: m.type, payload: Buffer.from(m.payload) });
      if (done !== undefined) {
        if (done < 0) throw new NetlinkError(`${req.what}: ${errnoName(-done)}`, errnoName(-done));
        return out;
      }
    }
  }

  /** dump(), then close(): for one dump alongside another socket's. */
  async dumpAndClose(req: NetlinkRequest): Promise<NetlinkMessage[]> {
    try {
      return await this.dump(req);
    } finally {
      this.close();
    }
  }

  /** Closes the socket; its fd once no request or dump is under way any more. */
  close(): void {
    this.#closed = true;
    if (this.#busy === 0) this.#closeFd();
  }

  #done(): void {
    if (--this.#busy === 0 && this.#closed) this.#closeFd();
  }

  #closeFd(): void {
    if (this.#fd >= 0) this.#c.close(this.#fd);
    this.#fd = -1;
  }
}
