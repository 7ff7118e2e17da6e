/**
 * What one node makes of the swarm's overlay records (overlay-networks.ts decides them): a vxlan
 * device per overlay network something here uses, flooding to the other nodes, with the ARP guard;
 * the names its DNS answers beyond its own containers (service VIPs, `tasks.<service>`, tasks on
 * other nodes); the VIP rules in the namespace of each of its containers on an overlay network.
 * Every step writes only what changed since the last call.
 */
import { errorMessage } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { DnsRecord } from '../../network/aardvark.js';
import type { NetworkController } from '../networks/network-controller.js';
import type { NetworkRecord } from '../networks/network-record.js';
import { bridgeSettings } from '../networks/network-record.js';
import { applyVipRules, type VipTarget } from '../../network/service-vip.js';
import { deleteVxlan, ensureVxlan, hostVxlanTools, setVxlanPeers, syncArpGuard, vxlanName } from '../../network/vxlan-link.js';
import { VNI_OPTION } from './overlay-ipam.js';
import { meshInUse } from './ingress-mesh.js';
import type { SwarmStore } from './swarm-store.js';
import { taskContainerName, type ServiceSpec, type TaskRecord } from './swarm-model.js';

export interface OverlayNodeDeps {
  store: SwarmStore;
  driver: NetworkController;
  /** The addresses of the cluster's nodes (this one is left out). */
  peers?: () => string[];
}

export class OverlayNode {
  readonly #d: OverlayNodeDeps;
  /** network id -> vxlan device made on this node. */
  readonly #devices = new Map<string, string>();
  /** container id -> the VIP rules last applied in its namespace. */
  readonly #applied = new Map<string, string>();
  /** network id -> the peers its device floods to, as last written. */
  readonly #peers = new Map<string, string>();
  /** The ARP guard's ports as last written. */
  #guard = '[]';

  constructor(d: OverlayNodeDeps) {
    this.#d = d;
  }

  /** Whether this node has any overlay device (so there is something to follow outside a swarm). */
  get active(): boolean {
    return this.#devices.size > 0;
  }

  /** A container ended: its next namespace gets its rules afresh. */
  forget(containerId: string): void {
    this.#applied.delete(containerId);
  }

  /** Makes devices, names and VIP rules match the records, for the overlay networks this node has. */
  async apply(overlays: NetworkRecord[]): Promise<void> {
    await this.#syncDevices(overlays);
    const live = [...this.#d.store.tasks.values()].filter((t) => t.status.state === 'running' && t.desiredState === 'running' && t.networks?.length);
    // The routing mesh's network carries published ports only: no names, no VIP rules there (dockerd's neither).
    await Promise.all(overlays.map((n) => this.#d.driver.setExtraDns(n.id, n.ingress ? [] : this.#dnsRecords(n, live))));
    await this.#syncVipRules(overlays, live);
  }

  /**
   * A vxlan device on this node's bridge, flooding to every other node, for each overlay network
   * something here is on (a container, or a task this node is to run); it goes with the network.
   */
  async #syncDevices(overlays: NetworkRecord[]): Promise<void> {
    const c = this.#d.store.cluster;
    const needed = new Set(this.#devices.keys());
    for (const t of this.#d.store.tasks.values()) if (t.nodeId === c?.node.id && t.desiredState === 'running') for (const a of t.networks ?? []) needed.add(a.networkId);
    for (const n of overlays) if (this.#d.driver.endpointsOf(n.id).length) needed.add(n.id);
    // The routing mesh reaches tasks on every node through ingress, wherever a port is published.
    const ingress = overlays.find((n) => n.ingress);
    if (ingress && meshInUse(this.#d.store.services.values())) needed.add(ingress.id);
    const wanted = new Map<string, NetworkRecord>(c ? overlays.filter((n) => vniOf(n) !== undefined && needed.has(n.id)).map((n) => [n.id, n]) : []);
    for (const [id, device] of this.#devices) {
      if (wanted.has(id)) continue;
      await deleteVxlan(hostVxlanTools, device);
      this.#devices.delete(id);
      this.#peers.delete(id);
    }
    const peers = (this.#d.peers?.() ?? []).filter((p) => p !== c?.node.addr);
    for (const n of wanted.values()) {
      const vni = vniOf(n)!;
      const name = vxlanName(this.#d.driver.prefix, vni);
      // The mesh's ingress device has nothing to reach on a node alone (a swarm of one), and would
      // clash with another daemon's on this host (VNI 4096 on the same advertise address).
      if (n.ingress && !this.#devices.has(n.id) && peers.length === 0) continue;
      if (!this.#devices.has(n.id)) {
        await ensureVxlan(hostVxlanTools, { name, vni, port: c!.dataPathPort, local: c!.node.addr, bridge: n.bridgeName, mtu: bridgeSettings(n).mtu });
        this.#devices.set(n.id, name);
      }
      const key = [...peers].sort().join();
      if (this.#peers.get(n.id) === key) continue;
      await setVxlanPeers(hostVxlanTools, name, peers);
      this.#peers.set(n.id, key);
    }
    const guard = [...wanted.values()].filter((n) => this.#devices.has(n.id)).map((n) => ({ device: this.#devices.get(n.id)!, gateway: n.gateway }));
    if (JSON.stringify(guard) === this.#guard) return;
    await syncArpGuard(hostVxlanTools, this.#d.driver.prefix, guard);
    this.#guard = JSON.stringify(guard);
  }

  #dnsRecords(n: NetworkRecord, live: TaskRecord[]): DnsRecord[] {
    const here = this.#d.store.cluster?.node.id;
    const records: DnsRecord[] = [];
    const addressOn = (t: TaskRecord) => t.networks!.find((a) => a.networkId === n.id)?.addresses[0]?.split('/')[0];
    for (const s of this.#d.store.services.values()) {
      const vip = s.virtualIPs?.find((v) => v.NetworkID === n.id);
      if (vip) records.push({ containerId: `vip-${s.id}`, ipv4: vip.Addr.split('/')[0], names: [s.spec.Name!] });
      const dnsrr = !vip && networkTargets(s.spec).some((x) => x.Target === n.id || x.Target === n.name);
      for (const t of live) {
        if (t.serviceId !== s.id) continue;
        const ip = addressOn(t);
        if (!ip) continue;
        // The node's own task containers already answer to their names.
        const names = [`tasks.${s.spec.Name}`, ...(t.nodeId !== here ? [taskContainerName(t)] : []), ...(dnsrr ? [s.spec.Name!] : [])];
        records.push({ containerId: `task-${t.id}`, ipv4: ip, names });
      }
    }
    return records;
  }

  /** In the namespace of each of this node's containers on an overlay network: its networks' VIPs. */
  async #syncVipRules(overlays: NetworkRecord[], live: TaskRecord[]): Promise<void> {
    const byContainer = new Map<string, VipTarget[]>();
    for (const n of overlays) {
      if (n.ingress) continue;
      const targets: VipTarget[] = [];
      for (const s of this.#d.store.services.values()) {
        const vip = s.virtualIPs?.find((v) => v.NetworkID === n.id);
        if (!vip) continue;
        const backends = live.filter((t) => t.serviceId === s.id).map((t) => t.networks!.find((a) => a.networkId === n.id)?.addresses[0]?.split('/')[0]).filter((x): x is string => !!x);
        targets.push({ vip: vip.Addr.split('/')[0]!, backends });
      }
      for (const e of this.#d.driver.endpointsOf(n.id)) {
        const list = byContainer.get(e.containerId) ?? [];
        list.push(...targets);
        byContainer.set(e.containerId, list);
      }
    }
    for (const id of this.#applied.keys()) if (!byContainer.has(id)) this.#applied.delete(id);
    await Promise.all(
      [...byContainer].map(async ([id, targets]) => {
        const key = JSON.stringify(targets);
        if (this.#applied.get(id) === key) return;
        try {
          await applyVipRules(['nsenter', `--net=${this.#d.driver.netnsPath(id)}`, 'nft'], targets);
          this.#applied.set(id, key);
        } catch (err) {
          // The container may have just ended; its next start syncs again.
          log.debug('VIP rules not applied', { container: id, error: errorMessage(err) });
        }
      }),
    );
  }
}

/** TaskTemplate.Networks, or the deprecated top-level Networks. */
export function networkTargets(spec: ServiceSpec): { Target: string; Aliases?: string[] }[] {
  const tt = spec.TaskTemplate as { Networks?: { Target?: string; Aliases?: string[] }[] } | undefined;
  const list = tt?.Networks?.length ? tt.Networks : ((spec as { Networks?: { Target?: string; Aliases?: string[] }[] }).Networks ?? []);
  return list.filter((x) => !!x?.Target).map((x) => ({ Target: x.Target!, ...(x.Aliases?.length ? { Aliases: x.Aliases } : {}) }));
}

export function vniOf(n: NetworkRecord): number | undefined {
  const v = Number(n.options[VNI_OPTION]);
  return n.overlay && Number.isInteger(v) && v > 0 ? v : undefined;
}
