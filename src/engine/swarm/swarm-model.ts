/**
 * Swarm objects as Berth stores them. Specs keep the Engine API's own shape (they are the user's
 * stated intent and are shown back as given); what the orchestrator derives or observes lives in
 * camelCase fields beside them, like the container record does.
 */
import { internal } from '../../lib/errors.js';

/**
 * dockerd's answer to an update whose `version` is not the object's current one, or that another
 * change overtook (swarmkit's store refuses it; the gRPC error is Unknown, so a 500).
 */
/** An error text as dockerd passes swarmkit's gRPC errors on. */
export const rpc = (code: string, desc: string): string => `rpc error: code = ${code} desc = ${desc}`;
export const outOfSequence = () => internal(rpc('Unknown', 'update out of sequence'));

export const TASK_STATES = [
  'new', 'allocated', 'pending', 'assigned', 'accepted', 'preparing', 'ready', 'starting', 'running',
  'complete', 'shutdown', 'failed', 'rejected', 'remove', 'orphaned',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

export const stateRank = (s: TaskState): number => TASK_STATES.indexOf(s);
/** complete, shutdown, failed, rejected, remove, orphaned: the task's container will not run again. */
export const isTerminal = (s: TaskState): boolean => stateRank(s) > stateRank('running');

/** Nanosecond durations, as the API carries Go's time.Duration. */
export const SECOND_NS = 1_000_000_000;

/** The swarm's heartbeat period in seconds (dockerd's default 5 s when the cluster names none). */
export function heartbeatSeconds(c: { spec: { Dispatcher?: { HeartbeatPeriod?: number } } } | undefined): number {
  return Number(c?.spec.Dispatcher?.HeartbeatPeriod ?? 5 * SECOND_NS) / SECOND_NS;
}

export interface RestartPolicy {
  Condition?: 'none' | 'on-failure' | 'any';
  Delay?: number;
  MaxAttempts?: number;
  Window?: number;
}

export interface UpdateConfig {
  Parallelism?: number;
  Delay?: number;
  FailureAction?: 'continue' | 'pause' | 'rollback';
  Monitor?: number;
  MaxFailureRatio?: number;
  Order?: 'stop-first' | 'start-first';
}

export interface PortConfig {
  Name?: string;
  Protocol?: 'tcp' | 'udp' | 'sctp';
  TargetPort?: number;
  PublishedPort?: number;
  PublishMode?: 'ingress' | 'host';
}

export interface EndpointSpec {
  Mode?: 'vip' | 'dnsrr';
  Ports?: PortConfig[];
}

export interface ContainerSpec {
  Image?: string;
  Labels?: Record<string, string>;
  Command?: string[];
  Args?: string[];
  Hostname?: string;
  Env?: string[];
  Dir?: string;
  User?: string;
  Groups?: string[];
  TTY?: boolean;
  OpenStdin?: boolean;
  ReadOnly?: boolean;
  Mounts?: Record<string, unknown>[];
  StopSignal?: string;
  StopGracePeriod?: number;
  HealthCheck?: { Test?: string[]; Interval?: number; Timeout?: number; StartPeriod?: number; StartInterval?: number; Retries?: number };
  Hosts?: string[];
  DNSConfig?: { Nameservers?: string[]; Search?: string[]; Options?: string[] };
  Init?: boolean | null;
  Sysctls?: Record<string, string>;
  CapabilityAdd?: string[];
  CapabilityDrop?: string[];
  Ulimits?: { Name: string; Soft: number; Hard: number }[];
  [k: string]: unknown;
}

export interface TaskSpec {
  ContainerSpec?: ContainerSpec;
  Resources?: {
    Limits?: { NanoCPUs?: number; MemoryBytes?: number; Pids?: number };
    Reservations?: { NanoCPUs?: number; MemoryBytes?: number };
    [k: string]: unknown;
  };
  RestartPolicy?: RestartPolicy;
  Placement?: { Constraints?: string[]; [k: string]: unknown };
  ForceUpdate?: number;
  LogDriver?: { Name?: string; Options?: Record<string, string> };
  [k: string]: unknown;
}

export interface ServiceMode {
  Replicated?: { Replicas?: number };
  Global?: Record<string, never>;
  ReplicatedJob?: { MaxConcurrent?: number; TotalCompletions?: number };
  GlobalJob?: Record<string, never>;
}

export interface ServiceSpec {
  Name?: string;
  Labels?: Record<string, string>;
  TaskTemplate?: TaskSpec;
  Mode?: ServiceMode;
  UpdateConfig?: UpdateConfig;
  RollbackConfig?: UpdateConfig;
  EndpointSpec?: EndpointSpec;
  [k: string]: unknown;
}

export interface SwarmSpec {
  Name?: string;
  Labels?: Record<string, string>;
  Orchestration?: { TaskHistoryRetentionLimit?: number };
  Raft?: Record<string, unknown>;
  Dispatcher?: Record<string, unknown>;
  CAConfig?: Record<string, unknown>;
  EncryptionConfig?: { AutoLockManagers?: boolean };
  TaskDefaults?: Record<string, unknown>;
  [k: string]: unknown;
}

export interface NodeSpec {
  Name?: string;
  Labels?: Record<string, string>;
  Role?: 'manager' | 'worker';
  Availability?: 'active' | 'pause' | 'drain';
}

interface Meta {
  id: string;
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface NodeRecord extends Meta {
  spec: NodeSpec;
  /** The address advertised to other nodes (no port). */
  addr: string;
  /** host:port managers would be reached at ('' for a worker). */
  managerAddr: string;
  /** host:port of the node's swarm port, where managers ask for its tasks' logs (older records: none). */
  peerAddr?: string;
  /** What the node told at join (this node's own host facts otherwise). */
  description?: { hostname: string; architecture: string; ncpu: number; memTotal: number };
}

/** How this node reaches the cluster's etcd, and what it runs of it. */
export interface ClusterLocal {
  endpoints: string[];
  /** The etcd member this node runs (managers, with a berth-managed etcd). */
  member?: { clientPort: number; peerPort: number; initialCluster: string; initialState: 'new' | 'existing' };
  /** The port the join listener serves (the swarm port). */
  listenPort: number;
  listenHost: string;
}

export interface ClusterRecord extends Meta {
  spec: SwarmSpec;
  joinTokens: { worker: string; manager: string };
  /** '' unless the managers are auto-locked. */
  unlockKey: string;
  defaultAddrPool: string[];
  subnetSize: number;
  dataPathPort: number;
  node: NodeRecord;
  /** The cluster CA (PEM), when the swarm has one. */
  caCert?: string;
  /** etcd's auth is on (cluster/etcd-auth.ts; the etcd berthd runs only). */
  etcdAuth?: boolean;
  /** This node's link to the cluster (absent in a swarm of one without etcd). */
  local?: ClusterLocal;
  /** The other nodes as last seen, for a start without etcd. */
  nodeCache?: NodeRecord[];
}

export interface UpdateStatus {
  State: 'updating' | 'paused' | 'completed' | 'rollback_started' | 'rollback_paused' | 'rollback_completed';
  StartedAt?: string;
  CompletedAt?: string;
  Message: string;
}

export interface ServiceRecord extends Meta {
  spec: ServiceSpec;
  previousSpec?: ServiceSpec;
  /** The version at which the task template last changed: tasks made before it are out of date. */
  templateVersion: number;
  /** EndpointSpec ports with the published ports the swarm assigned. */
  ports: PortConfig[];
  updateStatus?: UpdateStatus;
  /** X-Registry-Auth given at create or update, for pulling the image; never shown. */
  registryAuth?: string;
  /** One address per overlay network the service is on (Endpoint.VirtualIPs); none in dnsrr mode. */
  virtualIPs?: VirtualIP[];
}

export interface VirtualIP {
  NetworkID: string;
  /** address/prefix */
  Addr: string;
}

/** A task's address on one overlay network, chosen by the manager (NetworksAttachments). */
export interface TaskNetwork {
  networkId: string;
  networkName: string;
  /** The network as the manager has it, so the node running the task can realise it (swarmkit carries it likewise). */
  network?: { subnet: string; gateway: string; options: Record<string, string>; labels: Record<string, string>; attachable: boolean; internal: boolean; ingress?: boolean };
  /** address/prefix */
  addresses: string[];
  aliases?: string[];
}

export interface TaskStatus {
  timestamp: string;
  state: TaskState;
  message: string;
  err: string;
  containerId: string;
  pid: number;
  exitCode?: number;
  /** Host-mode ports bound for this task. */
  ports?: PortConfig[];
}

export interface TaskRecord extends Meta {
  serviceId: string;
  serviceName: string;
  /** 1..N for replicated services, 0 for global ones (whose slot is the node). */
  slot: number;
  nodeId: string;
  spec: TaskSpec;
  templateVersion: number;
  desiredState: TaskState;
  status: TaskStatus;
  /** Epoch ms at which a restarted task may start (restart delay). */
  startAt?: number;
  /** A start-first/stop-first update: start only once this task has stopped. */
  after?: string;
  /** Epoch ms of the restarts that led to this task in its slot (restart policy MaxAttempts/Window). */
  restarts: number[];
  /** The job iteration (the service's template version) a job's task belongs to. */
  jobIteration?: number;
  /** How many tasks before this one in its slot failed in a row without ever running (back-off). */
  failures?: number;
  /** When the task's container last reached running (epoch ms), for update monitoring. */
  runningSince?: number;
  /** The container is gone (removed by hand or reaped). */
  containerGone?: boolean;
  /** Overlay networks the task is on, with its addresses there. */
  networks?: TaskNetwork[];
}

/** Labels every task container carries; they override user labels of the same name. */
export const TASK_LABELS = {
  task: 'com.docker.swarm.task',
  taskId: 'com.docker.swarm.task.id',
  taskName: 'com.docker.swarm.task.name',
  nodeId: 'com.docker.swarm.node.id',
  serviceId: 'com.docker.swarm.service.id',
  serviceName: 'com.docker.swarm.service.name',
} as const;

/** `web.2.<taskid>` for replicated tasks, `web.<nodeid>.<taskid>` for global ones. */
export function taskContainerName(t: Pick<TaskRecord, 'serviceName' | 'slot' | 'nodeId' | 'id'>): string {
  return `${t.serviceName}.${t.slot || t.nodeId}.${t.id}`;
}

/** One task per node: global services and global jobs. */
export function isGlobal(spec: ServiceSpec): boolean {
  return !!spec.Mode?.Global || !!spec.Mode?.GlobalJob;
}

/** Job services run their tasks to completion instead of keeping them running. */
export function isJob(spec: ServiceSpec): boolean {
  return !!spec.Mode?.ReplicatedJob || !!spec.Mode?.GlobalJob;
}

/** The mode as the `mode` filter names it. */
export function modeName(spec: ServiceSpec): 'replicated' | 'global' | 'replicated-job' | 'global-job' {
  return spec.Mode?.ReplicatedJob ? 'replicated-job' : spec.Mode?.GlobalJob ? 'global-job' : spec.Mode?.Global ? 'global' : 'replicated';
}

export function replicas(spec: ServiceSpec): number {
  return spec.Mode?.Replicated?.Replicas ?? 1;
}

/** What a reader of a task's log wants of it (GET /services/{id}/logs, and node to node). */
export interface TaskLogQuery {
  stdout: boolean;
  stderr: boolean;
  follow: boolean;
  /** Last records per task; -1: all. */
  tail: number;
  /** Only records after this time (ns since the epoch). */
  since?: bigint;
}
