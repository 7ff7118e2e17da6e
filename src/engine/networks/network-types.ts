/**
 * The network controller's types: what the engine passes in and gets back. Docker's wire names
 * (IPAddress, Gateway, ...) are the api layer's business; these are plain camelCase.
 */
import type { NetworkRecords } from '../../state/network-records.js';
import type { BridgeDriver } from '../../network/bridge-driver.js';
import type { Protocol } from '../../network/host-ports.js';
import type { NetworkRecord } from './network-record.js';

export type { Protocol } from '../../network/host-ports.js';

export interface NetworkControllerOptions {
  /** The stored networks, endpoints and ports. */
  records: NetworkRecords;
  /** The host side: bridges, veths, namespaces, nftables, aardvark-dns. */
  driver: BridgeDriver;
  /** A fixed subnet for the default bridge (default: the first free of 172.17.0.0/16, 172.18.0.0/16, ...). */
  defaultBridgeSubnet?: string;
  /** Host-wide lock for choosing subnets (shared by all daemons on the machine). */
  subnetLockPath?: string;
  /** Network namespaces kept ready, for the default bridge and with only loopback, each (default 2; 0 turns it off). */
  readyNamespaces?: number;
  /** Run once a network's bridge device exists, and before it is deleted (e.g. to add or remove devices of an overlay). */
  bridgeHooks?: readonly BridgeHooks[];
  /** In a swarm cluster: the guard that makes a plain container's address on an overlay network unique across nodes. */
  addressClaims?: () => AddressClaims | undefined;
}

/**
 * Addresses of plain (attachable) containers on overlay networks are chosen by each node: before one
 * is taken here, the cluster's store must grant it (engine/swarm/overlay-networks.ts). `next` picks a
 * free address here that is none of `skip` (addresses found held elsewhere) and throws when none is left.
 */
export interface AddressClaims {
  claimAddress(net: NetworkRecord, containerId: string, next: (skip: ReadonlySet<string>) => string): Promise<string>;
}

/** Code run with a bridge's lifecycle; a hook that throws fails the create (which is undone) or is logged at removal. */
export interface BridgeHooks {
  created?(n: NetworkRecord): Promise<void>;
  deleting?(n: NetworkRecord): Promise<void>;
}

export interface AttachNetwork {
  /** Name, id or unique id prefix. */
  network: string;
  aliases?: string[];
  ipv4?: string;
  ipv6?: string;
  mac?: string;
  /** A swarm task's container: may join an overlay network that is not attachable. */
  swarmTask?: boolean;
}

export interface PortBinding {
  containerPort: number;
  protocol: Protocol;
  /** '' means the network's default (0.0.0.0): every host address. */
  hostIp: string;
  /** 0 means a free port picked by the kernel. */
  hostPort: number;
}

export interface AttachSpec {
  containerId: string;
  /** The container's name, with or without the leading slash. */
  name: string;
  netnsPath: string;
  networks: AttachNetwork[];
  ports?: PortBinding[];
  /** Upstream DNS servers for this container (--dns); names on its networks still resolve. */
  dns?: string[];
}

export interface EndpointInfo {
  networkId: string;
  networkName: string;
  endpointId: string;
  ipAddress: string;
  ipPrefixLen: number;
  gateway: string;
  ipv6Address: string;
  ipv6PrefixLen: number;
  ipv6Gateway: string;
  macAddress: string;
  /** The user's aliases on this network. */
  aliases: string[];
  /** Every name this endpoint answers to in DNS (name, aliases, short id); [] without DNS. */
  dnsNames: string[];
  /** The device inside the container (eth0, eth1, ...). */
  ifName: string;
}

export interface PublishedPort {
  containerPort: number;
  protocol: Protocol;
  hostIp: string;
  hostPort: number;
}

export interface AttachResult {
  endpoints: Record<string, EndpointInfo>;
  ports: PublishedPort[];
}

export interface SetupOptions {
  /**
   * Hand the DNS servers' updates back as `dnsDone` instead of waiting for them: a start creates the
   * process meanwhile and waits for them before the process runs (containers starting together on a
   * network share one reload, which would otherwise hold up every one of them).
   */
  deferDns?: boolean;
}

/** setup()'s answer: '' as netnsPath for the host network; `dnsDone` only with `deferDns` and DNS on a network. */
export interface SetupResult extends AttachResult {
  netnsPath: string;
  dnsDone?: Promise<void>;
}

export interface ConnectSpec extends AttachNetwork {
  containerId: string;
  name: string;
  netnsPath: string;
  dns?: string[];
}

/** Stored with each endpoint row. */
export interface EndpointData {
  endpointId: string;
  containerName: string;
  order: number;
  ifName: string;
  hostVeth: string;
  mac: string;
  netnsPath: string;
  ipv4PrefixLen: number;
  ipv6PrefixLen: number;
  aliases: string[];
  dnsServers?: string[];
}

/** An endpoint in memory: the row plus its data. */
export interface Endpoint extends EndpointData {
  containerId: string;
  networkId: string;
  ipv4: string;
  ipv6: string;
  createdAt: number;
}
