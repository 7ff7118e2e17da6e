/** Swarm objects in the Engine API's wire format: Swarm, Node, Service, Task and /info's Swarm section. */
import { SERVER_VERSION } from '../router.js';
import { withDefaults } from '../../engine/swarm/service-spec.js';
import { tlsInfo, type ServiceCounts, type SwarmService } from '../../engine/swarm/swarm.js';
import { isJob, type ClusterRecord, type NodeRecord, type ServiceRecord, type TaskRecord } from '../../engine/swarm/swarm-model.js';

const EMPTY_TLS = { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' };

/** ClusterInfo (/info) or Swarm (GET /swarm, with the join tokens). */
export function clusterJson(c: ClusterRecord, withTokens: boolean): Record<string, unknown> {
  return {
    ID: c.id,
    Version: { Index: c.version },
    CreatedAt: c.createdAt,
    UpdatedAt: c.updatedAt,
    Spec: c.spec,
    TLSInfo: c.caCert ? tlsInfo(c.caCert) : EMPTY_TLS,
    RootRotationInProgress: false,
    DefaultAddrPool: c.defaultAddrPool,
    SubnetSize: c.subnetSize,
    DataPathPort: c.dataPathPort,
    ...(withTokens ? { JoinTokens: { Worker: c.joinTokens.worker, Manager: c.joinTokens.manager } } : {}),
  };
}

export function nodeJson(n: NodeRecord, swarm: SwarmService): Record<string, unknown> {
  const host = swarm.host;
  const d = n.description ?? { hostname: host.name, architecture: host.architecture, ncpu: host.ncpu, memTotal: host.memTotal };
  const ready = swarm.nodeReady(n.id);
  const ca = swarm.clusterNow?.caCert;
  return {
    ID: n.id,
    Version: { Index: n.version },
    CreatedAt: n.createdAt,
    UpdatedAt: n.updatedAt,
    Spec: n.spec,
    Description: {
      Hostname: d.hostname,
      Platform: { Architecture: d.architecture, OS: 'linux' },
      Resources: { NanoCPUs: d.ncpu * 1e9, MemoryBytes: d.memTotal },
      Engine: {
        EngineVersion: SERVER_VERSION,
        Plugins: [
          { Type: 'Log', Name: 'json-file' },
          { Type: 'Network', Name: 'bridge' },
          { Type: 'Network', Name: 'host' },
          { Type: 'Network', Name: 'null' },
          { Type: 'Volume', Name: 'local' },
        ],
      },
      TLSInfo: ca ? tlsInfo(ca) : EMPTY_TLS,
    },
    Status: { State: ready ? 'ready' : 'down', Addr: n.addr },
    ...(n.spec.Role !== 'worker'
      ? { ManagerStatus: { ...(swarm.leaderId === n.id ? { Leader: true } : {}), Reachability: ready ? 'reachable' : 'unreachable', Addr: n.managerAddr } }
      : {}),
  };
}

export function serviceJson(s: ServiceRecord, opts: { insertDefaults?: boolean; counts?: ServiceCounts } = {}): Record<string, unknown> {
  const spec = opts.insertDefaults ? withDefaults(s.spec) : s.spec;
  const endpointSpec = { Mode: s.spec.EndpointSpec?.Mode || 'vip', ...(s.spec.EndpointSpec?.Ports?.length ? { Ports: s.spec.EndpointSpec.Ports } : {}) };
  return {
    ID: s.id,
    Version: { Index: s.version },
    CreatedAt: s.createdAt,
    UpdatedAt: s.updatedAt,
    Spec: spec,
    ...(s.previousSpec ? { PreviousSpec: opts.insertDefaults ? withDefaults(s.previousSpec) : s.previousSpec } : {}),
    Endpoint: { Spec: endpointSpec, ...(s.ports.length ? { Ports: s.ports } : {}), ...(s.virtualIPs?.length ? { VirtualIPs: s.virtualIPs } : {}) },
    ...(s.updateStatus ? { UpdateStatus: s.updateStatus } : {}),
    ...(isJob(s.spec) ? { JobStatus: { JobIteration: { Index: s.templateVersion }, LastExecution: s.updatedAt } } : {}),
    ...(opts.counts ? { ServiceStatus: { RunningTasks: opts.counts.running, DesiredTasks: opts.counts.desired, CompletedTasks: opts.counts.completed } } : {}),
  };
}

export function taskJson(t: TaskRecord): Record<string, unknown> {
  const st = t.status;
  const hostPorts = st.ports?.length ? { Ports: st.ports } : {};
  return {
    ID: t.id,
    Version: { Index: t.version },
    CreatedAt: t.createdAt,
    UpdatedAt: t.updatedAt,
    Labels: {},
    Spec: t.spec,
    ServiceID: t.serviceId,
    ...(t.slot ? { Slot: t.slot } : {}),
    ...(t.nodeId ? { NodeID: t.nodeId } : {}),
    Status: {
      Timestamp: st.timestamp,
      State: st.state,
      Message: st.message,
      ...(st.err ? { Err: st.err } : {}),
      ...(st.containerId ? { ContainerStatus: { ContainerID: st.containerId, PID: st.pid, ExitCode: st.exitCode ?? 0 } } : {}),
      PortStatus: hostPorts,
    },
    DesiredState: t.desiredState,
    ...(t.networks?.length ? { NetworksAttachments: t.networks.map((a) => ({ Network: { ID: a.networkId, Spec: { Name: a.networkName, DriverConfiguration: { Name: 'overlay' }, Scope: 'swarm' } }, Addresses: a.addresses })) } : {}),
    ...(t.jobIteration !== undefined ? { JobIteration: { Index: t.jobIteration } } : {}),
  };
}

/** GET /info's Swarm section. */
export function swarmInfoJson(swarm: SwarmService | undefined): Record<string, unknown> {
  const c = swarm?.clusterNow;
  if (!swarm || !c) return { NodeID: '', NodeAddr: '', LocalNodeState: 'inactive', ControlAvailable: false, Error: '', RemoteManagers: null };
  const nodes = swarm.nodesNow();
  const managers = nodes.filter((n) => n.spec.Role !== 'worker');
  return {
    NodeID: c.node.id,
    NodeAddr: c.node.addr,
    LocalNodeState: swarm.locked ? 'locked' : 'active',
    ControlAvailable: swarm.isManager && !swarm.locked,
    Error: '',
    RemoteManagers: managers.map((n) => ({ NodeID: n.id, Addr: n.managerAddr })),
    ...(swarm.isManager && !swarm.locked ? { Nodes: nodes.length, Managers: managers.length, Cluster: clusterJson(c, false) } : {}),
  };
}

/** The `Swarm` header of /_ping. */
export function swarmPingState(swarm: SwarmService | undefined): string {
  return swarm?.active ? (swarm.locked ? 'locked' : swarm.isManager ? 'active/manager' : 'active/worker') : 'inactive';
}
