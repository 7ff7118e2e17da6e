/**
 * rtnetlink requests and answers as bytes (linux/netlink.h, rtnetlink.h, if_link.h, if_addr.h,
 * veth.h): the few the bridge driver sends to put a container's interfaces in place, the same ones
 * `ip` sends for its `link add ... type veth`, `link set`, `addr add` and `route replace`. Pure: the
 * socket is netlink-socket.ts. Every request asks for an acknowledgement, so each has exactly one
 * answer with its error code (0 for success), after the reply of a GETLINK.
 */
import { formatAddress, parseAddress, type Address } from './cidr.js';

const NLMSG_HDRLEN = 16;
const NLMSG_ERROR = 2;
const NLMSG_DONE = 3;
const NLM_F_DUMP = 0x300;
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
const NLM_F_REPLACE = 0x100;
const NLM_F_EXCL = 0x200;
const NLM_F_CREATE = 0x400;
/** In an error answer: extended-ack attributes follow the (capped) request header. */
const NLM_F_ACK_TLVS = 0x200;
const NLM_F_CAPPED = 0x100;
const NLMSGERR_ATTR_MSG = 1;

const RTM_NEWLINK = 16;
const RTM_DELLINK = 17;
const RTM_GETLINK = 18;
const RTM_NEWADDR = 20;
const RTM_DELADDR = 21;
const RTM_GETADDR = 22;
const RTM_NEWROUTE = 24;
const RTM_DELROUTE = 25;
const RTM_GETROUTE = 26;

const IFLA_ADDRESS = 1;
const IFLA_IFNAME = 3;
const IFLA_MTU = 4;
const IFLA_MASTER = 10;
const IFLA_LINKINFO = 18;
const IFLA_NET_NS_FD = 28;
const IFLA_INFO_KIND = 1;
const IFLA_INFO_DATA = 2;
const IFLA_INFO_SLAVE_KIND = 4;
const IFLA_INFO_SLAVE_DATA = 5;
const VETH_INFO_PEER = 1;
const IFLA_BRPORT_MODE = 4;

const IFA_ADDRESS = 1;
const IFA_LOCAL = 2;
const IFA_BROADCAST = 4;
const IFA_F_NODAD = 0x02;

const RTA_DST = 1;
const RTA_OIF = 4;
const RTA_GATEWAY = 5;
const RTA_PREFSRC = 7;
const RTA_TABLE = 15;

const AF_INET = 2;
const AF_INET6 = 10;
const IFF_UP = 0x1;
const RT_TABLE_MAIN = 254;
export const RT_TABLE_LOCAL = 255;
const RTPROT_BOOT = 3;
const RT_SCOPE_UNIVERSE = 0;
const RT_SCOPE_NOWHERE = 255;
const RTN_UNICAST = 1;
const RTN_MULTICAST = 5;
/** The loopback device's index in every network namespace. */
export const LOOPBACK_INDEX = 1;

/** One request; `what` names it in errors. A dump is answered by many messages and NLMSG_DONE. */
export interface NetlinkRequest {
  type: number;
  flags: number;
  body: Buffer;
  attrs: Buffer[];
  what: string;
  dump?: boolean;
}

/** The kernel's answer to one request: its error (0, or a negative errno) and, for GETLINK, the link's index. */
export interface NetlinkAnswer {
  seq: number;
  /** 0 or -errno; undefined for a reply that is not the acknowledgement. */
  error?: number;
  /** The kernel's explanation of an error (extended ack), when it gave one. */
  message?: string;
  /** A link reply's ifindex. */
  index?: number;
}

function attr(type: number, data: Buffer): Buffer {
  const len = 4 + data.length;
  const b = Buffer.alloc((len + 3) & ~3);
  b.writeUInt16LE(len, 0);
  b.writeUInt16LE(type, 2);
  data.copy(b, 4);
  return b;
}

const nested = (type: number, parts: Buffer[]): Buffer => attr(type, Buffer.concat(parts));
const str = (s: string): Buffer => Buffer.from(`${s}\0`);
const u8 = (n: number): Buffer => Buffer.from([n]);
function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
}

function ifinfomsg(index = 0, flags = 0, change = 0): Buffer {
  const b = Buffer.alloc(16);
  b.writeInt32LE(index, 4);
  b.writeUInt32LE(flags, 8);
  b.writeUInt32LE(change, 12);
  return b;
}

function macBytes(mac: string): Buffer {
  const parts = mac.split(':');
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p))) throw new Error(`invalid MAC address ${mac}`);
  return Buffer.from(parts.map((p) => parseInt(p, 16)));
}

function parsed(ip: string): Address {
  const a = parseAddress(ip);
  if (!a) throw new Error(`invalid IP address ${ip}`);
  return a;
}

/** An address in network byte order (4 or 16 bytes). */
function addressBytes(a: Address): Buffer {
  const n = a.family === 4 ? 4 : 16;
  const b = Buffer.alloc(n);
  let v = a.value;
  for (let i = n - 1; i >= 0; i--) {
    b[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return b;
}

/**
 * `link add <name> address <mac> mtu <mtu> type veth peer name <peer> mtu <mtu> netns <fd>`: the pair is
 * made in the socket's namespace and its peer put into the namespace of `peerNsFd`.
 */
export function addVeth(o: { name: string; mac: string; mtu: number; peer: string; peerNsFd: number }): NetlinkRequest {
  const peer = Buffer.concat([ifinfomsg(), attr(IFLA_IFNAME, str(o.peer)), attr(IFLA_MTU, u32(o.mtu)), attr(IFLA_NET_NS_FD, u32(o.peerNsFd))]);
  return {
    type: RTM_NEWLINK,
    flags: NLM_F_CREATE | NLM_F_EXCL,
    body: ifinfomsg(),
    attrs: [
      attr(IFLA_IFNAME, str(o.name)),
      attr(IFLA_ADDRESS, macBytes(o.mac)),
      attr(IFLA_MTU, u32(o.mtu)),
      nested(IFLA_LINKINFO, [attr(IFLA_INFO_KIND, str('veth')), nested(IFLA_INFO_DATA, [attr(VETH_INFO_PEER, peer)])]),
    ],
    what: `link add ${o.name} type veth peer name ${o.peer}`,
  };
}

/** `ip link show <name>`: answered with the link (its index) before the acknowledgement. */
export function getLink(name: string): NetlinkRequest {
  return { type: RTM_GETLINK, flags: 0, body: ifinfomsg(), attrs: [attr(IFLA_IFNAME, str(name))], what: `link show ${name}` };
}

/** `link set <dev> [master <index>] up`, the device by index or by name. */
export function setLinkUp(dev: { index: number } | { name: string }, master?: number): NetlinkRequest {
  const byName = 'name' in dev;
  return {
    type: RTM_NEWLINK,
    flags: 0,
    body: ifinfomsg(byName ? 0 : dev.index, IFF_UP, IFF_UP),
    attrs: [...(byName ? [attr(IFLA_IFNAME, str(dev.name))] : []), ...(master === undefined ? [] : [attr(IFLA_MASTER, u32(master))])],
    what: `link set ${byName ? dev.name : `index ${dev.index}`}${master === undefined ? '' : ' master'} up`,
  };
}

/** `link set dev <name> type bridge_slave hairpin on`: a container can reach its own published port through the host. */
export function setHairpin(name: string): NetlinkRequest {
  return {
    type: RTM_NEWLINK,
    flags: 0,
    body: ifinfomsg(),
    attrs: [attr(IFLA_IFNAME, str(name)), nested(IFLA_LINKINFO, [attr(IFLA_INFO_SLAVE_KIND, str('bridge')), nested(IFLA_INFO_SLAVE_DATA, [attr(IFLA_BRPORT_MODE, u8(1))])])],
    what: `link set dev ${name} type bridge_slave hairpin on`,
  };
}

/** `addr add <ip>/<len> [brd +] dev <index>`; IPv6 with `nodad` (no duplicate detection delays it). */
export function addAddress(index: number, ip: string, prefixLen: number): NetlinkRequest {
  const a = parsed(ip);
  const body = Buffer.alloc(8);
  body.writeUInt8(a.family === 4 ? AF_INET : AF_INET6, 0);
  body.writeUInt8(prefixLen, 1);
  body.writeUInt8(a.family === 6 ? IFA_F_NODAD : 0, 2);
  body.writeUInt8(RT_SCOPE_UNIVERSE, 3);
  body.writeUInt32LE(index, 4);
  const attrs = [attr(IFA_LOCAL, addressBytes(a)), attr(IFA_ADDRESS, addressBytes(a))];
  if (a.family === 4) {
    const hostBits = (1n << BigInt(32 - prefixLen)) - 1n;
    attrs.push(attr(IFA_BROADCAST, addressBytes({ family: 4, value: a.value | hostBits })));
  }
  return { type: RTM_NEWADDR, flags: NLM_F_CREATE | NLM_F_EXCL, body, attrs, what: `addr add ${ip}/${prefixLen} dev index ${index}` };
}

export interface RouteSpec {
  /** undefined: the default route. */
  dst?: string;
  dstLen?: number;
  gateway: string;
  oif: number;
  /** Preferred source address. */
  src?: string;
  table?: number;
}

function routeMessage(type: number, flags: number, r: RouteSpec, what: string): NetlinkRequest {
  const gw = parsed(r.gateway);
  const table = r.table ?? RT_TABLE_MAIN;
  const body = Buffer.alloc(12);
  body.writeUInt8(gw.family === 4 ? AF_INET : AF_INET6, 0);
  body.writeUInt8(r.dst ? (r.dstLen ?? (gw.family === 4 ? 32 : 128)) : 0, 1);
  body.writeUInt8(table < 256 ? table : 0, 4);
  body.writeUInt8(RTPROT_BOOT, 5);
  body.writeUInt8(RT_SCOPE_UNIVERSE, 6);
  body.writeUInt8(RTN_UNICAST, 7);
  const attrs = [attr(RTA_TABLE, u32(table))];
  if (r.dst) attrs.push(attr(RTA_DST, addressBytes(parsed(r.dst))));
  attrs.push(attr(RTA_GATEWAY, addressBytes(gw)), attr(RTA_OIF, u32(r.oif)));
  if (r.src) attrs.push(attr(RTA_PREFSRC, addressBytes(parsed(r.src))));
  return { type, flags, body, attrs, what };
}

/** `route replace <dst or default> via <gateway> dev <oif> [src <src>] [table <table>]`. */
export function replaceRoute(r: RouteSpec): NetlinkRequest {
  return routeMessage(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, r, `route replace ${r.dst ?? 'default'} via ${r.gateway}`);
}

/** `route del <dst>/<len> table <table>` (what the route goes through does not matter). */
export function deleteRoute(dst: string, dstLen: number, table: number): NetlinkRequest {
  const a = parsed(dst);
  const body = Buffer.alloc(12);
  body.writeUInt8(a.family === 4 ? AF_INET : AF_INET6, 0);
  body.writeUInt8(dstLen, 1);
  body.writeUInt8(table < 256 ? table : 0, 4);
  body.writeUInt8(RT_SCOPE_NOWHERE, 6); // any scope, type and protocol
  return { type: RTM_DELROUTE, flags: 0, body, attrs: [attr(RTA_TABLE, u32(table)), attr(RTA_DST, addressBytes(a))], what: `route del ${dst}/${dstLen} table ${table}` };
}

/** `link del dev <name>`. */
export function deleteLink(name: string): NetlinkRequest {
  return { type: RTM_DELLINK, flags: 0, body: ifinfomsg(), attrs: [attr(IFLA_IFNAME, str(name))], what: `link del dev ${name}` };
}

/** `link add name <name> address <mac> mtu <mtu> type bridge`. */
export function addBridge(name: string, mac: string, mtu: number): NetlinkRequest {
  return {
    type: RTM_NEWLINK,
    flags: NLM_F_CREATE | NLM_F_EXCL,
    body: ifinfomsg(),
    attrs: [attr(IFLA_IFNAME, str(name)), attr(IFLA_ADDRESS, macBytes(mac)), attr(IFLA_MTU, u32(mtu)), nested(IFLA_LINKINFO, [attr(IFLA_INFO_KIND, str('bridge'))])],
    what: `link add name ${name} type bridge`,
  };
}

/** `link set <name> mtu <mtu>`. */
export function setMtu(name: string, mtu: number): NetlinkRequest {
  return { type: RTM_NEWLINK, flags: 0, body: ifinfomsg(), attrs: [attr(IFLA_IFNAME, str(name)), attr(IFLA_MTU, u32(mtu))], what: `link set ${name} mtu ${mtu}` };
}

/** `addr del <ip>/<len> dev <index>`. */
export function deleteAddress(index: number, ip: string, prefixLen: number): NetlinkRequest {
  const req = addAddress(index, ip, prefixLen);
  return { ...req, type: RTM_DELADDR, flags: 0, attrs: req.attrs.slice(0, 2), what: `addr del ${ip}/${prefixLen} dev index ${index}` };
}

/** Every link of the socket's namespace (`ip -d link show`). */
export function dumpLinks(): NetlinkRequest {
  return { type: RTM_GETLINK, flags: 0, body: ifinfomsg(), attrs: [], what: 'link show', dump: true };
}

/** Every address (`ip addr show`). */
export function dumpAddresses(): NetlinkRequest {
  return { type: RTM_GETADDR, flags: 0, body: Buffer.alloc(8), attrs: [], what: 'addr show', dump: true };
}

/** Every route of one family, in every table (`ip -4|-6 route show table all`). */
export function dumpRoutes(family: 4 | 6): NetlinkRequest {
  const body = Buffer.alloc(12);
  body.writeUInt8(family === 4 ? AF_INET : AF_INET6, 0);
  return { type: RTM_GETROUTE, flags: 0, body, attrs: [], what: `-${family} route show table all`, dump: true };
}

/** One message of a dump: its type and what follows the header. */
export interface NetlinkMessage {
  type: number;
  payload: Buffer;
}

/** The attributes after a fixed-size header, by type (nested ones as their raw bytes). */
function attrsOf(buf: Buffer, offset: number): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  for (let o = offset; o + 4 <= buf.length; ) {
    const len = buf.readUInt16LE(o);
    if (len < 4 || o + len > buf.length) break;
    out.set(buf.readUInt16LE(o + 2) & 0x3fff, buf.subarray(o + 4, o + len));
    o += (len + 3) & ~3;
  }
  return out;
}

const cstr = (b: Buffer | undefined): string | undefined => (b ? b.toString('utf8').replace(/\0.*$/s, '') : undefined);

/** A link of a dump: index, name and kind (bridge, veth...). */
export function parseLink(m: NetlinkMessage): { index: number; name: string; kind?: string } | undefined {
  if (m.type !== RTM_NEWLINK) return undefined;
  const a = attrsOf(m.payload, 16);
  const info = a.get(IFLA_LINKINFO);
  return { index: m.payload.readInt32LE(4), name: cstr(a.get(IFLA_IFNAME)) ?? '', kind: info ? cstr(attrsOf(info, 0).get(IFLA_INFO_KIND)) : undefined };
}

function formatIp(b: Buffer): string {
  if (b.length === 4) return [...b].join('.');
  let v = 0n;
  for (const byte of b) v = (v << 8n) | BigInt(byte);
  return formatAddress({ family: 6, value: v });
}

/** An address of a dump: its link's index, family and `address/prefixLen` as `ip` prints it. */
export function parseAddr(m: NetlinkMessage): { index: number; family: 4 | 6; address: string; prefixLen: number } | undefined {
  if (m.type !== RTM_NEWADDR) return undefined;
  const family = m.payload.readUInt8(0) === AF_INET ? 4 : 6;
  const a = attrsOf(m.payload, 8);
  const local = a.get(IFA_LOCAL) ?? a.get(IFA_ADDRESS);
  if (!local) return undefined;
  return { index: m.payload.readUInt32LE(4), family, address: formatIp(local), prefixLen: m.payload.readUInt8(1) };
}

/** A route of a dump: its destination (undefined for a default route) unless it is multicast. */
export function parseRoute(m: NetlinkMessage): { family: 4 | 6; dst?: string; dstLen: number; multicast: boolean } | undefined {
  if (m.type !== RTM_NEWROUTE) return undefined;
  const family = m.payload.readUInt8(0) === AF_INET ? 4 : 6;
  const dst = attrsOf(m.payload, 12).get(RTA_DST);
  return { family, dst: dst ? formatIp(dst) : undefined, dstLen: m.payload.readUInt8(1), multicast: m.payload.readUInt8(7) === RTN_MULTICAST };
}

/** The messages of a datagram with their types; `done` when it ends the dump (with its error code). */
export function decodeMessages(buf: Buffer): { messages: NetlinkMessage[]; done?: number } {
  const messages: NetlinkMessage[] = [];
  for (let o = 0; o + NLMSG_HDRLEN <= buf.length; ) {
    const len = buf.readUInt32LE(o);
    if (len < NLMSG_HDRLEN || o + len > buf.length) break;
    const type = buf.readUInt16LE(o + 4);
    if (type === NLMSG_DONE) return { messages, done: len >= NLMSG_HDRLEN + 4 ? buf.readInt32LE(o + NLMSG_HDRLEN) : 0 };
    if (type === NLMSG_ERROR) return { messages, done: buf.readInt32LE(o + NLMSG_HDRLEN) };
    messages.push({ type, payload: buf.subarray(o + NLMSG_HDRLEN, o + len) });
    o += (len + 3) & ~3;
  }
  return { messages };
}

/** The requests as one buffer, numbered from `firstSeq` on, each asking for an acknowledgement. */
export function encodeRequests(reqs: readonly NetlinkRequest[], firstSeq: number): Buffer {
  return Buffer.concat(
    reqs.map((r, i) => {
      const payload = Buffer.concat([r.body, ...r.attrs]);
      const h = Buffer.alloc(NLMSG_HDRLEN);
      h.writeUInt32LE(NLMSG_HDRLEN + payload.length, 0);
      h.writeUInt16LE(r.type, 4);
      h.writeUInt16LE(NLM_F_REQUEST | (r.dump ? NLM_F_DUMP : NLM_F_ACK) | r.flags, 6);
      h.writeUInt32LE((firstSeq + i) >>> 0, 8);
      return Buffer.concat([h, payload]);
    }),
  );
}

/** The answers in a datagram the kernel sent. */
export function decodeAnswers(buf: Buffer): NetlinkAnswer[] {
  const out: NetlinkAnswer[] = [];
  for (let o = 0; o + NLMSG_HDRLEN <= buf.length; ) {
    const len = buf.readUInt32LE(o);
    if (len < NLMSG_HDRLEN || o + len > buf.length) break;
    const type = buf.readUInt16LE(o + 4);
    const flags = buf.readUInt16LE(o + 6);
    const seq = buf.readUInt32LE(o + 8);
    if (type === NLMSG_ERROR) {
      const error = buf.readInt32LE(o + NLMSG_HDRLEN);
      const answer: NetlinkAnswer = { seq, error };
      if (flags & NLM_F_ACK_TLVS) {
        // The request's header follows the error code; with NLM_F_CAPPED, without its payload.
        const inner = o + NLMSG_HDRLEN + 4;
        let a = inner + (flags & NLM_F_CAPPED ? NLMSG_HDRLEN : buf.readUInt32LE(inner));
        a = (a + 3) & ~3;
        while (a + 4 <= o + len) {
          const alen = buf.readUInt16LE(a);
          if (alen < 4) break;
          if ((buf.readUInt16LE(a + 2) & 0x3fff) === NLMSGERR_ATTR_MSG) answer.message = buf.toString('utf8', a + 4, a + alen).replace(/\0+$/, '');
          a += (alen + 3) & ~3;
        }
      }
      out.push(answer);
    } else if (type === RTM_NEWLINK) {
      out.push({ seq, index: buf.readInt32LE(o + NLMSG_HDRLEN + 4) });
    } else {
      out.push({ seq });
    }
    o += (len + 3) & ~3;
  }
  return out;
}
