/**
 * The host side of bridge networking for one daemon: the mechanism, never the records. The engine's
 * network controller decides networks, addresses and ports and hands this driver plain descriptions
 * (bridge specs, plumbing plans, firewall rules, DNS tables) to apply with the kernel's own tools (ip,
 * nft, nsenter, unshare) and aardvark-dns.
 *
 * Every device, chain and file carries the daemon's prefix: bridges `<prefix>0` (default) and
 * `<prefix>-<id>`, host-side veths `<prefix><hex>`, the nftables table `inet <prefix>`, state under
 * `<execRoot>/network`. Nothing else on the host is ever touched, apart from turning on
 * net.ipv4.ip_forward.
 */
import { existsSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomHex } from '../lib/random-hex.js';
import { invalidArgument } from '../lib/errors.js';
import { log } from '../lib/log.js';
import { Aardvark } from './aardvark.js';
import { createBridge, createBridgeByNetlink, deleteBridge, deleteBridgeByNetlink, enableIPv4Forwarding, linkExists, listLinks, listLinksByNetlink, type BridgeSpec, type LinkInfo } from './bridge-device.js';
import { deleteHostVeths, plumbCommands, plumbExisting, type PlumbPlan, type Tools } from './endpoint-plumbing.js';
import { Firewall } from './firewall.js';
import { claimPrefix, releasePrefix } from './host-lock.js';
import { hostRoutePrefixes, hostRoutePrefixesByNetlink, parseResolvConf, type ResolvConf } from './host-routes.js';
import type { Cidr } from './cidr.js';
import { NetnsDir } from './netns.js';
import { plumbByNetlink } from './netlink-plumbing.js';
import { netlinkAvailable } from './netlink-socket.js';
import { ownNamespacePath } from './ns-calls.js';
import { ToolShell } from './tool-shell.js';
import { VethDrain, type DrainingVeth } from './veth-drain.js';

export interface BridgeDriverOptions {
  execRoot: string;
  /** Per-daemon name prefix for devices, chains and the nft table: [a-z][a-z0-9]{0,7}. */
  prefix: string;
  /** The default bridge's device (default `<prefix>0`). */
  defaultBridgeName?: string;
  aardvarkPath?: string;
  /**
   * The port aardvark-dns listens on at each gateway (default 53). Containers always ask 127.0.0.11:53,
   * which is forwarded there; another port avoids a clash with a DNS server bound to 0.0.0.0:53 on the host.
   */
  dnsPort?: number;
  /** The host's resolv.conf, read for containers' resolv.conf (default /etc/resolv.conf). */
  hostResolvConf?: string;
  /** The host's hosts file, copied for containers on the host network (default /etc/hosts). */
  hostHosts?: string;
  tools?: Partial<DriverTools>;
}

export type DriverTools = Tools & { unshare: string; mount: string; umount: string };

const PREFIX_RE = /^[a-z][a-z0-9]{0,7}$/;
const IFNAME_RE = /^[a-zA-Z0-9_.-]{1,15}$/;
/** Names of namespace files made ahead of time (container ids are hex, so never clash). */
export const READY_PREFIX = 'ready-';

export function validateBridgeName(name: string): void {
  if (!IFNAME_RE.test(name)) throw invalidArgument(`invalid bridge name "${name}": 1-15 characters of [a-zA-Z0-9_.-]`);
}

export class BridgeDriver {
  readonly prefix: string;
  readonly defaultBridgeName: string;
  readonly dnsPort: number;
  readonly firewall: Firewall;
  readonly dns: Aardvark;
  readonly netns: NetnsDir;
  /** Host-side veths of released endpoints, going with their namespaces (see veth-drain.ts). */
  readonly drain: VethDrain;
  readonly #tools: DriverTools;
  readonly #stateDir: string;
  readonly #hostResolvConf: string;
  readonly #hostHosts: string;
  /** How `ip` names berthd's namespace (see ownNamespacePath). */
  get #hostNs(): string {
    return ownNamespacePath();
  }
  /** Several shells: containers starting together each get their network from one. */
  readonly #shell = new ToolShell(4);
  /** The host's resolv.conf as last read, and what identified that version of the file. */
  #resolvConf: { key: string; value: ResolvConf } | undefined;
  /** Whether released veths are left to go with their namespace. */
  #drainWithNetns = false;

  constructor(opts: BridgeDriverOptions) {
    if (!PREFIX_RE.test(opts.prefix)) throw invalidArgument(`invalid network prefix "${opts.prefix}": [a-z][a-z0-9]{0,7}`);
    this.prefix = opts.prefix;
    this.defaultBridgeName = opts.defaultBridgeName ?? `${opts.prefix}0`;
    validateBridgeName(this.defaultBridgeName);
    this.dnsPort = opts.dnsPort ?? 53;
    const t = opts.tools ?? {};
    this.#tools = { ip: t.ip ?? 'ip', nft: t.nft ?? 'nft', nsenter: t.nsenter ?? 'nsenter', unshare: t.unshare ?? 'unshare', mount: t.mount ?? 'mount', umount: t.umount ?? 'umount' };
    this.#stateDir = join(opts.execRoot, 'network');
    this.#hostResolvConf = opts.hostResolvConf ?? '/etc/resolv.conf';
    this.#hostHosts = opts.hostHosts ?? '/etc/hosts';
    this.firewall = new Firewall(opts.prefix, this.#tools.nft, this.#shell.tool);
    this.dns = new Aardvark(join(this.#stateDir, 'dns'), opts.aardvarkPath ?? '/usr/lib/podman/aardvark-dns', this.dnsPort);
    this.netns = new NetnsDir(join(this.#stateDir, 'netns'), this.#tools, this.#shell);
    this.drain = new VethDrain(this.#tools.ip);
  }

  /** Claims the prefix on this host and prepares the state and namespace directories. */
  async open(): Promise<void> {
    claimPrefix(this.prefix);
    await mkdir(this.#stateDir, { recursive: true });
    await this.netns.init();
  }

  /** Host settings containers need: IPv4 forwarding on; warns when bridged traffic bypasses nftables. */
  async prepareHost(): Promise<void> {
    // Draining by watching /sys/class/net needs a sysfs of the daemon's own namespace.
    this.#drainWithNetns = existsSync(`/sys/class/net/${this.defaultBridgeName}`);
    await enableIPv4Forwarding();
    const brnf = await readFile('/proc/sys/net/bridge/bridge-nf-call-iptables', 'utf8').catch(() => '0');
    if (brnf.trim() !== '1') {
      log.warn('net.bridge.bridge-nf-call-iptables is off: traffic between containers on one bridge bypasses the firewall (icc=false, loopback guard)');
    }
  }

  /** A user network's bridge device name: `<prefix>-<start of its id>`, 15 characters at most. */
  bridgeNameFor(networkId: string): string {
    return `${this.prefix}-${networkId.slice(0, 14 - this.prefix.length)}`;
  }

  newVethName(): string {
    return `${this.prefix}${randomHex(8).slice(0, 15 - this.prefix.length)}`;
  }

  // Links, routes and bridges over rtnetlink where libc can be called (no process: a network create
  // ran five `ip` before), else `ip` from the tool shells.

  links(): Promise<Map<string, LinkInfo>> {
    return netlinkAvailable() ? listLinksByNetlink() : listLinks(this.#tools.ip, this.#shell.tool);
  }

  /** Whether the host has a device of that name (one lookup, where links() lists them all). */
  async hasLink(name: string): Promise<boolean> {
    return netlinkAvailable() ? linkExists(name) : (await this.links()).has(name);
  }

  createBridge(spec: BridgeSpec): Promise<void> {
    return netlinkAvailable() ? createBridgeByNetlink(spec) : createBridge(this.#tools.ip, spec, this.#shell.tool);
  }

  deleteBridge(name: string): Promise<void> {
    return netlinkAvailable() ? deleteBridgeByNetlink(name) : deleteBridge(this.#tools.ip, name, this.#shell.tool);
  }

  /**
   * Devices of this prefix that `keep` does not name: left by a daemon that used the prefix with
   * another data root (the prefix is claimed, so no live daemon owns them). Removed from `links` too.
   */
  async removeStrayDevices(links: Map<string, LinkInfo>, keep: { bridges: Set<string>; veths: Set<string> }): Promise<void> {
    const strayBridges = [...links.values()].filter((l) => l.kind === 'bridge' && l.name.startsWith(`${this.prefix}-`) && !keep.bridges.has(l.name));
    const strayVeths = [...links.values()].filter((l) => l.kind === 'veth' && l.name.startsWith(this.prefix) && !keep.veths.has(l.name));
    if (strayBridges.length + strayVeths.length === 0) return;
    log.info('removing devices an earlier daemon with this prefix left', { bridges: strayBridges.map((l) => l.name), veths: strayVeths.length });
    await deleteHostVeths(strayVeths.map((l) => l.name), this.#tools.ip);
    for (const l of strayBridges) await deleteBridge(this.#tools.ip, l.name);
    for (const l of [...strayBridges, ...strayVeths]) links.delete(l.name);
  }

  /** Namespaces made ahead by an earlier run that no container took (their veths go with them). */
  async removeReadyLeftovers(): Promise<void> {
    for (const name of await this.netns.unadopted()) if (name.startsWith(READY_PREFIX)) await this.netns.remove(name);
  }

  hostRoutes(): Promise<Cidr[]> {
    return netlinkAvailable() ? hostRoutePrefixesByNetlink() : hostRoutePrefixes(this.#tools.ip, this.#shell.tool);
  }

  /**
   * The host's resolv.conf, parsed; read again only when the file changed (one stat per container
   * start instead of a read).
   */
  async hostResolvConf(): Promise<ResolvConf> {
    const st = statSync(this.#hostResolvConf, { bigint: true, throwIfNoEntry: false });
    const key = st ? `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}` : '';
    if (this.#resolvConf?.key === key) return this.#resolvConf.value;
    const value = parseResolvConf(await readFile(this.#hostResolvConf, 'utf8').catch(() => ''));
    this.#resolvConf = { key, value };
    return value;
  }

  /** The host's /etc/hosts; a localhost line alone when it cannot be read. */
  async hostHosts(): Promise<string> {
    return readFile(this.#hostHosts, 'utf8').catch(() => '127.0.0.1\tlocalhost\n');
  }

  /**
   * A new namespace for the container, plumbed by `plan`: from berthd itself where libc can be called
   * (ns-calls.ts, netlink-plumbing.ts), else one job of the tool shells; never a fork of the daemon.
   */
  async plumbNew(containerId: string, plan: PlumbPlan): Promise<void> {
    if (netlinkAvailable()) return this.#plumbNewInProcess(containerId, plan);
    const { inside, after } = this.#plumbSteps(plan);
    await this.netns.create(containerId, inside.input ? inside : undefined, after);
  }

  /** A new namespace and its interfaces from berthd itself: no process at all. */
  async #plumbNewInProcess(name: string, plan: PlumbPlan): Promise<void> {
    const path = await this.netns.createInProcess(name);
    try {
      await plumbByNetlink(path, { ...plan, loopbackUp: true });
    } catch (err) {
      await this.netns.remove(name).catch(() => {});
      throw err;
    }
  }

  plumbExisting(netnsPath: string, plan: PlumbPlan): Promise<void> {
    return plumbExisting(netnsPath, plan, this.#tools, this.#hostNs);
  }

  /**
   * Makes a namespace made ahead with nothing but loopback the container's, loopback up (one made
   * from berthd itself has it still down; see createAhead).
   */
  async adoptBare(containerId: string, name: string): Promise<void> {
    const path = await this.netns.adopt(containerId, name);
    if (netlinkAvailable()) await plumbByNetlink(path, { loopbackUp: true, add: [] });
  }

  /** Whether plumbInto works without a process (rtnetlink from berthd itself). */
  get plumbsInProcess(): boolean {
    return netlinkAvailable();
  }

  /**
   * Plumbs a namespace that has nothing but loopback yet (one made ahead): over rtnetlink from berthd,
   * no process at all; by `ip` through nsenter where that is not possible.
   */
  plumbInto(netnsPath: string, plan: PlumbPlan): Promise<void> {
    return netlinkAvailable() ? plumbByNetlink(netnsPath, plan) : this.plumbExisting(netnsPath, plan);
  }

  /** A namespace made ahead under `name` and plumbed by `plan`. */
  createAhead(name: string, plan: PlumbPlan): Promise<void> {
    // One with nothing to put in stays as made, loopback down: whoever adopts it plumbs it
    // (adoptBare, plumbInto), which saves entering it once more now (compose's creates wait meanwhile).
    if (netlinkAvailable()) return plan.add.length ? this.#plumbNewInProcess(name, plan) : this.netns.createInProcess(name).then(() => undefined);
    const { inside, after } = this.#plumbSteps(plan);
    return this.netns.createAhead(name, inside, after);
  }

  /** A plan as the command run inside a new namespace and the host's `ip` batch after it. */
  #plumbSteps(plan: PlumbPlan): { inside: { argv: string[]; input: string }; after: { argv: string[]; input: string }[] } {
    const cmds = plumbCommands(plan, this.#tools, this.#hostNs);
    return { inside: { argv: cmds.nsArgv, input: cmds.nsInput }, after: cmds.hostInput ? [{ argv: [this.#tools.ip, '-batch', '-'], input: cmds.hostInput }] : [] };
  }

  deleteVeths(names: readonly string[]): Promise<void> {
    return deleteHostVeths(names, this.#tools.ip);
  }

  /** Released veths: left to go with their namespace where that can be watched, else deleted now. */
  async releaseVeths(veths: readonly DrainingVeth[]): Promise<void> {
    if (this.#drainWithNetns) this.drain.add(veths);
    else await deleteHostVeths(veths.map((v) => v.hostVeth), this.#tools.ip);
  }

  /** Waits for namespaces and veths under way, then ends the tool shell. */
  async quiesce(): Promise<void> {
    await this.netns.settled();
    await this.drain.settled();
    this.#shell.close();
  }

  /**
   * Leaves bridges, rules and aardvark-dns in place for running containers. The namespace directory's
   * own mount goes when no namespace is left in it, so a stopped daemon's state directory can be deleted.
   */
  async close(): Promise<void> {
    if ((await readdir(this.netns.dir).catch(() => ['?'])).length === 0) await this.netns.unmountDir().catch(() => {});
    releasePrefix(this.prefix);
  }

  /** Removes every namespace file, the given bridges, the nftables table and aardvark-dns. */
  async destroy(veths: readonly string[], bridges: readonly string[]): Promise<void> {
    await deleteHostVeths([...veths, ...this.drain.takeAll()], this.#tools.ip);
    for (const f of await readdir(this.netns.dir).catch(() => [] as string[])) await this.netns.remove(f);
    await this.netns.unmountDir();
    for (const b of bridges) await deleteBridge(this.#tools.ip, b);
    await this.firewall.destroy().catch(() => {});
    await this.dns.destroy();
    releasePrefix(this.prefix);
  }
}
