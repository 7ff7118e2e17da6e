/**
 * Who holds which address on the overlay networks, across nodes, for plain (attachable) containers,
 * whose addresses each node picks itself: every node shares the ones its containers have
 * (`attachments/<node>`) and claims each in etcd first (`addresses/<network>/<ip>`, one transaction),
 * so that no two nodes give one address out. The node's driver is told which addresses are held
 * elsewhere; a claim goes once its container no longer has the address here.
 */
import { waitAtMost } from '../../lib/deadline.js';
import { errorMessage, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { NetworkController } from '../networks/network-controller.js';
import { forbidden, type NetworkRecord } from '../networks/network-record.js';
import type { SwarmStore } from './swarm-store.js';

/** What addresses are claimed through (cluster/etcd-state.ts): a transaction on `addresses/<network>/<ip>`. */
export interface ClaimStore {
  claim(key: string, doc: unknown): Promise<{ taken: true } | { taken: false; holder: unknown }>;
  release(key: string, doc: unknown): Promise<void>;
}

/** Who holds an address of an overlay network, as kept in etcd under `addresses/<network id>/<ip>`. */
export interface AddressClaim {
  node: string;
  container: string;
}

/** A claim made here is not released for this long while its container has no endpoint yet (its start is under way). */
const CLAIM_GRACE_MS = 60_000;
/** How many syncs look again for an ended container's endpoint to be gone (it may have restarted). */
const ENDED_LOOKS = 30;
/** How long leaving waits for etcd to take this node's claims back. */
const LEAVE_RELEASE_MS = 5000;
/** Addresses found held elsewhere before a start gives up (each costs one etcd transaction). */
const CLAIM_ATTEMPTS = 32;

export interface OverlayAddressDeps {
  store: SwarmStore;
  driver: NetworkController;
  /** Writes (undefined: deletes) `<kind>/<id>` in the cluster's store; nothing outside a cluster. */
  share?: (kind: string, id: string, doc: unknown) => void;
  /** The cluster's store for the claims; undefined outside a cluster. */
  claims?: () => ClaimStore | undefined;
  /** Asks the overlay's sync to run again (an ended container's endpoint may not be gone yet). */
  syncLater: () => void;
}

export class OverlayAddresses {
  readonly #d: OverlayAddressDeps;
  /** node id -> network id -> addresses of that node's own (non-task) containers, as it shares them. */
  readonly #attachments = new Map<string, Record<string, string[]>>();
  /** `<network id>/<ip>` -> its holder, for every node's plain containers on overlay networks (etcd's `addresses/`). */
  readonly #claims = new Map<string, AddressClaim>();
  /** Claims this node made, with when (a start may still be on its way to the endpoint). */
  readonly #claimedAt = new Map<string, number>();
  /**
   * Containers that died or left a network: their claims need no grace. Their endpoints go a moment
   * after the event, so the sync looks again (every second, a bounded number of times).
   */
  readonly #ended = new Map<string, number>();
  /** What this node last shared of its own containers' addresses. */
  #sharedAttachments = '{}';

  constructor(d: OverlayAddressDeps) {
    this.#d = d;
  }

  /** A container died or left a network: its claims go at the next sync, grace or not (its start is over). */
  ended(containerId: string): void {
    this.#ended.set(containerId, ENDED_LOOKS);
  }

  /** Another node's containers' addresses (those it chose itself): not given out here, nor by the manager to tasks. */
  applyRemoteAttachments(nodeId: string, doc: Record<string, string[]> | undefined): void {
    if (nodeId === this.#d.store.selfId) return;
    if (doc) this.#attachments.set(nodeId, doc);
    else this.#attachments.delete(nodeId);
    this.#reserve(this.#overlays());
  }

  /** A claim made, taken over or released on another node (or read at link time). */
  applyRemoteClaim(key: string, doc: AddressClaim | undefined): void {
    if (doc && typeof doc.node === 'string' && typeof doc.container === 'string') this.#claims.set(key, { node: doc.node, container: doc.container });
    // Only this node deletes its claims; one it made again since the deletion stays.
    else if (!this.#claimedAt.has(key)) this.#claims.delete(key);
    if (doc?.node !== this.#d.store.selfId) this.#reserve(this.#overlays());
  }

  /**
   * A plain container's address on an overlay network (AddressClaims, for the node's driver): the
   * address `next` picks is taken in etcd in one transaction, so two nodes starting containers at
   * the same moment never both hold it; one found held is skipped and the next one tried.
   */
  async claimAddress(net: NetworkRecord, containerId: string, next: (skip: ReadonlySet<string>) => string): Promise<string> {
    const store = this.#d.claims?.();
    const self = this.#d.store.selfId;
    if (!store || !self || !this.#d.store.clustered) return next(new Set());
    // Every claim known on the network: others' (their containers), and this node's own not yet
    // released (a start under way, or a container gone whose claim the next sync drops).
    const skip = new Set(this.#claimedOn(net.id));
    for (let i = 0; i < CLAIM_ATTEMPTS; i++) {
      const ip = next(skip);
      const key = `${net.id}/${ip}`;
      const doc: AddressClaim = { node: self, container: containerId };
      const r = await store.claim(`addresses/${key}`, doc).catch((err) => {
        throw unavailable(`cannot claim an address on network ${net.name}: the swarm's store does not answer: ${errorMessage(err)}`);
      });
      const holder = r.taken ? undefined : (r.holder as AddressClaim | undefined);
      // Held by this very endpoint already (berthd restarted): still ours.
      if (r.taken || (holder?.node === self && holder.container === containerId)) {
        this.#claims.set(key, doc);
        this.#claimedAt.set(key, Date.now());
        return ip;
      }
      if (holder) this.#claims.set(key, holder);
      skip.add(ip);
    }
    throw forbidden(`no available IPv4 addresses on network ${net.name}: ${CLAIM_ATTEMPTS} were found held by other nodes`);
  }

  /** Whoever holds `ip` on the network, as far as this node knows. */
  holder(networkId: string, ip: string): AddressClaim | undefined {
    return this.#claims.get(`${networkId}/${ip}`);
  }

  /** Every address of the network that is not this node's to give: other nodes' containers', and every claim. */
  taken(networkId: string): string[] {
    return [...this.#heldElsewhere(networkId), ...this.#claimedOn(networkId)];
  }

  /**
   * Part of the overlay's sync: this node's containers' addresses shared, the driver told what
   * others hold, and this node's claims whose container no longer has the address here released
   * (after the grace of a start under way). `alsoHeld`: a claim held without an endpoint (this
   * node's ingress address).
   */
  async sync(overlays: NetworkRecord[], alsoHeld: string | undefined): Promise<void> {
    this.#share(overlays);
    this.#reserve(overlays);
    await this.#release(overlays, alsoHeld);
  }

  /** Leaving the swarm, while the cluster's store still answers: this node's claims (its ingress address too) go. */
  async leaving(): Promise<void> {
    const store = this.#d.claims?.();
    const self = this.#d.store.selfId;
    if (!store || !self) return;
    const mine = [...this.#claims].filter(([, c]) => c.node === self);
    const released = Promise.all(mine.map(([key, c]) => store.release(`addresses/${key}`, c).catch((err) => log.warn('releasing an address claim failed', { key, error: errorMessage(err) }))));
    // A node cut off from etcd leaves all the same (`--force`): its claims then stay behind.
    await waitAtMost(released, LEAVE_RELEASE_MS);
  }

  /** Out of the swarm: nothing is known of any node's addresses any more. */
  clear(): void {
    this.#claims.clear();
    this.#claimedAt.clear();
    this.#attachments.clear();
    this.#sharedAttachments = '{}';
  }

  #overlays(): NetworkRecord[] {
    return this.#d.driver.list().filter((n) => n.overlay);
  }

  /** The network's claimed addresses: every one, or (`byOthers`) those other nodes hold. */
  #claimedOn(networkId: string, byOthers = false): string[] {
    const prefix = `${networkId}/`;
    const self = this.#d.store.selfId;
    return [...this.#claims].filter(([k, c]) => k.startsWith(prefix) && !(byOthers && c.node === self)).map(([k]) => k.slice(prefix.length));
  }

  #heldElsewhere(networkId: string): string[] {
    return [...[...this.#attachments.values()].flatMap((a) => a[networkId] ?? []), ...this.#claimedOn(networkId, true)];
  }

  #reserve(overlays: NetworkRecord[]): void {
    for (const n of overlays) this.#d.driver.setReservedAddresses(n.id, this.#heldElsewhere(n.id));
  }

  /** Shares the addresses this node gave its own containers on overlay networks (not tasks': the manager chose those). */
  #share(overlays: NetworkRecord[]): void {
    const self = this.#d.store.selfId;
    if (!self || !this.#d.store.clustered) return;
    const taskIps = new Set([...this.#d.store.tasks.values()].flatMap((t) => (t.networks ?? []).flatMap((a) => a.addresses.map((x) => x.split('/')[0]!))));
    const mine: Record<string, string[]> = {};
    for (const n of overlays) {
      const ips = this.#d.driver.endpointsOf(n.id).map((e) => e.ipAddress).filter((ip) => ip && !taskIps.has(ip)).sort();
      if (ips.length) mine[n.id] = ips;
    }
    const json = JSON.stringify(mine);
    if (json === this.#sharedAttachments) return;
    this.#sharedAttachments = json;
    this.#d.share?.('attachments', self, Object.keys(mine).length ? mine : undefined);
  }

  async #release(overlays: NetworkRecord[], alsoHeld: string | undefined): Promise<void> {
    const store = this.#d.claims?.();
    const self = this.#d.store.selfId;
    if (!store || !self) return;
    const held = new Set(overlays.flatMap((n) => this.#d.driver.endpointsOf(n.id).map((e) => `${n.id}/${e.ipAddress}`)));
    if (alsoHeld) held.add(alsoHeld);
    const now = Date.now();
    // Containers that end while this pass awaits etcd are looked at by the next one.
    const ended = new Map(this.#ended);
    const waiting = new Set<string>();
    for (const [key, c] of this.#claims) {
      if (c.node !== self) continue;
      if (held.has(key)) {
        if (ended.has(c.container)) waiting.add(c.container);
        continue;
      }
      if (!ended.has(c.container) && now - (this.#claimedAt.get(key) ?? 0) < CLAIM_GRACE_MS) continue;
      try {
        await store.release(`addresses/${key}`, c);
        this.#claims.delete(key);
        this.#claimedAt.delete(key);
      } catch (err) {
        log.debug('releasing an address claim failed; the next sync tries again', { key, error: errorMessage(err) });
      }
    }
    for (const [id, looks] of ended) {
      if (this.#ended.get(id) !== looks) continue; // ended again meanwhile
      if (!waiting.has(id) || looks <= 1) this.#ended.delete(id);
      else this.#ended.set(id, looks - 1);
    }
    if (waiting.size) setTimeout(() => this.#d.syncLater(), 1000).unref();
  }
}
