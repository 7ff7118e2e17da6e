/**
 * Host-side veths of released endpoints, until they are gone. A container's veth pair goes away with
 * its namespace: once the namespace file is unmounted and the container's processes are gone, the
 * kernel deletes the pair in the background. That costs the caller nothing, where `ip link del` is a
 * process plus RCU grace periods (about 30 ms on the test VM, more under load) right when a container
 * exits. Until a device is gone its endpoint's addresses stay reserved, so a new container never gets
 * an address (and the MAC derived from it) that is still on the bridge. A device still there after
 * GRACE_MS (its namespace is held elsewhere, e.g. by a container that joined it with
 * --network container:) is deleted explicitly.
 */
import { existsSync } from 'node:fs';
import { deleteHostVeths } from './endpoint-plumbing.js';

export interface DrainingVeth {
  hostVeth: string;
  networkId: string;
  ipv4: string;
  ipv6: string;
}

const POLL_MS = 10;
const GRACE_MS = 2000;

export class VethDrain {
  readonly #ip: string;
  readonly #sysClassNet: string;
  readonly #items = new Map<string, DrainingVeth & { since: number }>();
  #timer: NodeJS.Timeout | undefined;
  #idle: (() => void)[] = [];

  /** `sysClassNet` must list the daemon's own namespace (checked by the caller). */
  constructor(ip: string, sysClassNet = '/sys/class/net') {
    this.#ip = ip;
    this.#sysClassNet = sysClassNet;
  }

  add(veths: readonly DrainingVeth[]): void {
    const now = Date.now();
    for (const v of veths) this.#items.set(v.hostVeth, { ...v, since: now });
    if (veths.length && !this.#timer) this.#timer = setTimeout(() => void this.#tick(), POLL_MS);
  }

  /** Addresses (either family) still held by draining devices of a network. */
  addressesOf(networkId: string): string[] {
    const out: string[] = [];
    for (const v of this.#items.values()) {
      if (v.networkId !== networkId) continue;
      if (v.ipv4) out.push(v.ipv4);
      if (v.ipv6) out.push(v.ipv6);
    }
    return out;
  }

  /** Deletes the matching devices now (their addresses are wanted again, or their network goes). */
  async flush(match: (v: DrainingVeth) => boolean): Promise<void> {
    const names = [...this.#items.values()].filter(match).map((v) => v.hostVeth);
    if (names.length === 0) return;
    await deleteHostVeths(names, this.#ip);
    for (const n of names) this.#items.delete(n);
    this.#wakeIdle();
  }

  /** Resolves once every device handed over so far is gone. */
  settled(): Promise<void> {
    if (this.#items.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Every device still draining (for destroy); forgets them. */
  takeAll(): string[] {
    const names = [...this.#items.keys()];
    this.#items.clear();
    this.#wakeIdle();
    return names;
  }

  async #tick(): Promise<void> {
    const now = Date.now();
    const overdue: string[] = [];
    for (const [name, v] of this.#items) {
      if (!existsSync(`${this.#sysClassNet}/${name}`)) this.#items.delete(name);
      else if (now - v.since > GRACE_MS) overdue.push(name);
    }
    if (overdue.length) {
      await deleteHostVeths(overdue, this.#ip);
      for (const n of overdue) this.#items.delete(n);
    }
    this.#wakeIdle();
    this.#timer = this.#items.size ? setTimeout(() => void this.#tick(), POLL_MS) : undefined;
  }

  #wakeIdle(): void {
    if (this.#items.size) return;
    for (const resolve of this.#idle.splice(0)) resolve();
  }
}
