/**
 * A container's network at start and exit, through the network controller: which networks it joins
 * (NetworkMode plus the create request's EndpointsConfig), its published ports, and the /etc/hosts
 * and /etc/resolv.conf that go with them. The results are kept on the record for inspect.
 */
import type { NetworkController, PortBinding, AttachResult } from './network-controller.js';
import type { ContainerRecord } from '../containers/container-model.js';
import type { ContainerNetworking, NetworkFacts, NetworkPreparation } from '../containers/container-processes.js';
import { invalidArgument } from '../../lib/errors.js';
import { TASK_LABELS } from '../swarm/swarm-model.js';

export interface EndpointRequest {
  Aliases?: string[] | null;
  Links?: string[] | null;
  DriverOpts?: Record<string, string> | null;
  IPAMConfig?: { IPv4Address?: string; IPv6Address?: string } | null;
  MacAddress?: string;
}

export function networkModeOf(c: ContainerRecord): string {
  const m = c.hostConfig.NetworkMode || 'bridge';
  return m === 'default' ? 'bridge' : m;
}

/**
 * The networks the container joins at its next start, NetworkMode's first: dockerd's
 * NetworkSettings.Networks of a container that is not running. Empty for `container:<id>` and when
 * every network was disconnected (such a container starts as with `none`).
 */
export function configuredNetworks(c: ContainerRecord): string[] {
  const mode = networkModeOf(c);
  if (mode.startsWith('container:')) return [];
  const extra = Object.keys(c.networkingConfig).filter((n) => n !== mode && n !== 'default');
  return c.modeDisconnected ? extra : [mode, ...extra];
}

/** The endpoint settings asked for on one network, at create or connect. */
export function endpointRequest(c: ContainerRecord, network: string): EndpointRequest {
  const requested = c.networkingConfig as Record<string, EndpointRequest | null>;
  return requested[network] ?? (network === 'bridge' ? requested.default : undefined) ?? {};
}

/** PortBindings plus, with PublishAllPorts, every exposed port on a random host port. */
export function portBindings(c: ContainerRecord): PortBinding[] {
  const out: PortBinding[] = [];
  const bound = new Set<string>();
  for (const [key, list] of Object.entries(c.hostConfig.PortBindings ?? {})) {
    const [port, proto = 'tcp'] = key.split('/');
    const containerPort = Number(port);
    if (!Number.isInteger(containerPort) || containerPort < 1 || containerPort > 65535 || (proto !== 'tcp' && proto !== 'udp' && proto !== 'sctp')) {
      throw invalidArgument(`invalid port specification: "${key}"`);
    }
    if (proto === 'sctp') throw invalidArgument('sctp ports are not supported by Berth yet');
    for (const b of list?.length ? list : [{}]) {
      const hostPort = b.HostPort ? Number(b.HostPort.split('-')[0]) : 0;
      if (!Number.isInteger(hostPort) || hostPort < 0 || hostPort > 65535) throw invalidArgument(`invalid host port: "${b.HostPort}"`);
      out.push({ containerPort, protocol: proto, hostIp: b.HostIp ?? '', hostPort });
    }
    bound.add(`${containerPort}/${proto}`);
  }
  if (c.hostConfig.PublishAllPorts) {
    for (const key of Object.keys(c.config.ExposedPorts ?? {})) {
      const [port, proto = 'tcp'] = key.split('/');
      if (!bound.has(`${Number(port)}/${proto}`) && (proto === 'tcp' || proto === 'udp')) out.push({ containerPort: Number(port), protocol: proto, hostIp: '', hostPort: 0 });
    }
  }
  return out;
}

/**
 * A container's network at start and exit through the network controller. What it needs of other
 * containers (the pid whose namespace it joins, its links' /etc/hosts entries) the caller hands in:
 * networking never looks containers up itself.
 */
export class ContainerNetworkSetup implements ContainerNetworking {
  constructor(private readonly controller: NetworkController) {}

  async prepare(c: ContainerRecord, facts: NetworkFacts): Promise<NetworkPreparation> {
    const mode = networkModeOf(c);
    const hc = c.hostConfig;
    const fileOpts = { dns: hc.Dns ?? undefined, dnsSearch: hc.DnsSearch ?? undefined, dnsOptions: hc.DnsOptions ?? undefined };
    if (mode.startsWith('container:')) {
      const [resolvConf, hosts] = await Promise.all([this.controller.resolvConf([], fileOpts), this.hostsFile(c, facts.extraHosts)]);
      return { netnsPath: `/proc/${facts.joinPid}/ns/net`, hostNetwork: false, resolvConf, hosts };
    }
    const requested = c.networkingConfig as Record<string, EndpointRequest | null>;
    const configured = configuredNetworks(c);
    const names = configured.length ? configured : ['none'];
    const networks = names.map((n) => {
      const r = endpointRequest(c, n);
      return { network: n, aliases: r.Aliases ?? [], ipv4: r.IPAMConfig?.IPv4Address || undefined, ipv6: r.IPAMConfig?.IPv6Address || undefined, mac: r.MacAddress || c.config.MacAddress || undefined, swarmTask: c.config.Labels?.[TASK_LABELS.taskId] !== undefined };
    });
    const ports = names[0] === 'host' || names[0] === 'none' ? [] : portBindings(c);
    const result = await this.controller.setup({ containerId: c.id, name: c.name, networks, ports, dns: hc.Dns ?? undefined }, { deferDns: true });
    c.network = { ...toDockerNetwork(result, requested), sandboxKey: result.netnsPath };
    const hostNetwork = result.netnsPath === '';
    const [resolvConf, hosts] = await Promise.all([this.controller.resolvConf(names, fileOpts), this.hostsFile(c, facts.extraHosts, hostNetwork)]);
    return { netnsPath: hostNetwork ? undefined : result.netnsPath, hostNetwork, resolvConf, hosts, ...(result.dnsDone ? { ready: result.dnsDone } : {}) };
  }

  /**
   * Containers on the default bridge find their namespace made ahead already; one on another bridge
   * network or on none has one with only loopback made ahead for it now, in the background, so that
   * its start only puts its interfaces in (compose creates every container, then starts them all).
   */
  created(c: ContainerRecord): void {
    const mode = networkModeOf(c);
    if (mode === 'bridge' || mode === 'host' || mode.startsWith('container:')) return;
    this.controller.anticipateStart();
  }

  hostsFile(c: ContainerRecord, extraHosts: string[], hostNetwork = false): Promise<string> {
    return this.controller.hostsFile(c.id, { hostname: c.config.Hostname ?? c.id.slice(0, 12), domainname: c.config.Domainname, extraHosts, hostNetwork });
  }

  async started(): Promise<void> {
    // Namespaces made ahead are topped up now rather than during the start they were taken for.
    this.controller.replenish();
  }

  async release(c: ContainerRecord): Promise<void> {
    const mode = networkModeOf(c);
    if (mode.startsWith('container:')) return;
    // Host-side devices and the namespace file are independent: released side by side.
    const [detached, removed] = await Promise.allSettled([this.controller.detach(c.id), this.controller.removeNetns(c.id)]);
    if (detached.status === 'rejected') throw detached.reason;
    if (removed.status === 'rejected') throw removed.reason;
  }
}

/** The controller's endpoints and ports in inspect's shape (NetworkSettings.Networks and .Ports). */
export function toDockerNetwork(r: AttachResult, requested: Record<string, EndpointRequest | null> = {}): Pick<ContainerRecord['network'], 'endpoints' | 'ports'> {
  const endpoints: Record<string, Record<string, unknown>> = {};
  for (const [name, e] of Object.entries(r.endpoints)) {
    const req = requested[name] ?? {};
    endpoints[name] = {
      IPAMConfig: req.IPAMConfig ?? null,
      Links: req.Links?.length ? req.Links : null,
      Aliases: e.aliases.length ? e.aliases : null,
      MacAddress: e.macAddress,
      DriverOpts: req.DriverOpts ?? null,
      NetworkID: e.networkId,
      EndpointID: e.endpointId,
      Gateway: e.gateway,
      IPAddress: e.ipAddress,
      IPPrefixLen: e.ipPrefixLen,
      IPv6Gateway: e.ipv6Gateway,
      GlobalIPv6Address: e.ipv6Address,
      GlobalIPv6PrefixLen: e.ipv6PrefixLen,
      DNSNames: e.dnsNames.length ? e.dnsNames : null,
    };
  }
  const ports: Record<string, { HostIp: string; HostPort: string }[]> = {};
  for (const p of r.ports) {
    const key = `${p.containerPort}/${p.protocol}`;
    (ports[key] ??= []).push({ HostIp: p.hostIp, HostPort: String(p.hostPort) });
  }
  return { endpoints, ports };
}
