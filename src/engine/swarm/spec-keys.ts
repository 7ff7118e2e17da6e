/**
 * Field names of a service spec as dockerd reads them: Go's JSON decoder matches object keys to struct
 * fields without regard to case (docker-py sends `{"Mode": {"replicated": {...}}}`), ignores unknown
 * ones and writes the canonical names back. This walks a spec the same way; map-valued fields (labels,
 * options, sysctls) keep their keys as given.
 */

/** A struct: canonical field → its shape. `MAP` is a string map, `LEAF` a scalar or list of scalars. */
type Shape = { [field: string]: Shape | typeof LEAF | typeof MAP | [Shape] };
const LEAF = 'leaf' as const;
const MAP = 'map' as const;

const UPDATE_CONFIG: Shape = { Parallelism: LEAF, Delay: LEAF, FailureAction: LEAF, Monitor: LEAF, MaxFailureRatio: LEAF, Order: LEAF };
const FILE_TARGET: Shape = { Name: LEAF, UID: LEAF, GID: LEAF, Mode: LEAF };
const DRIVER: Shape = { Name: LEAF, Options: MAP };
const GENERIC: [Shape] = [{ NamedResourceSpec: { Kind: LEAF, Value: LEAF }, DiscreteResourceSpec: { Kind: LEAF, Value: LEAF } }];
const NETWORK_ATTACHMENT: [Shape] = [{ Target: LEAF, Aliases: LEAF, DriverOpts: MAP }];

const CONTAINER_SPEC: Shape = {
  Image: LEAF, Labels: MAP, Command: LEAF, Args: LEAF, Hostname: LEAF, Env: LEAF, Dir: LEAF, User: LEAF, Groups: LEAF,
  Privileges: {
    CredentialSpec: { Config: LEAF, File: LEAF, Registry: LEAF },
    SELinuxContext: { Disable: LEAF, User: LEAF, Role: LEAF, Type: LEAF, Level: LEAF },
    Seccomp: { Mode: LEAF, Profile: LEAF },
    AppArmor: { Mode: LEAF },
    NoNewPrivileges: LEAF,
  },
  TTY: LEAF, OpenStdin: LEAF, ReadOnly: LEAF,
  Mounts: [{
    Target: LEAF, Source: LEAF, Type: LEAF, ReadOnly: LEAF, Consistency: LEAF,
    BindOptions: { Propagation: LEAF, NonRecursive: LEAF, CreateMountpoint: LEAF, ReadOnlyNonRecursive: LEAF, ReadOnlyForceRecursive: LEAF },
    VolumeOptions: { NoCopy: LEAF, Labels: MAP, DriverConfig: DRIVER, Subpath: LEAF },
    TmpfsOptions: { SizeBytes: LEAF, Mode: LEAF, Options: LEAF },
    ImageOptions: { Subpath: LEAF },
  }],
  StopSignal: LEAF, StopGracePeriod: LEAF,
  HealthCheck: { Test: LEAF, Interval: LEAF, Timeout: LEAF, Retries: LEAF, StartPeriod: LEAF, StartInterval: LEAF },
  Hosts: LEAF,
  DNSConfig: { Nameservers: LEAF, Search: LEAF, Options: LEAF },
  Secrets: [{ File: FILE_TARGET, SecretID: LEAF, SecretName: LEAF }],
  Configs: [{ File: FILE_TARGET, Runtime: {}, ConfigID: LEAF, ConfigName: LEAF }],
  Isolation: LEAF, Init: LEAF, Sysctls: MAP, CapabilityAdd: LEAF, CapabilityDrop: LEAF,
  Ulimits: [{ Name: LEAF, Soft: LEAF, Hard: LEAF }],
  OomScoreAdj: LEAF,
};

const SERVICE_SPEC: Shape = {
  Name: LEAF,
  Labels: MAP,
  TaskTemplate: {
    PluginSpec: { Name: LEAF, Remote: LEAF, Disabled: LEAF, PluginPrivilege: [{ Name: LEAF, Description: LEAF, Value: LEAF }] },
    ContainerSpec: CONTAINER_SPEC,
    NetworkAttachmentSpec: { ContainerID: LEAF },
    Resources: {
      Limits: { NanoCPUs: LEAF, MemoryBytes: LEAF, Pids: LEAF },
      Reservations: { NanoCPUs: LEAF, MemoryBytes: LEAF, GenericResources: GENERIC },
    },
    RestartPolicy: { Condition: LEAF, Delay: LEAF, MaxAttempts: LEAF, Window: LEAF },
    Placement: {
      Constraints: LEAF,
      Preferences: [{ Spread: { SpreadDescriptor: LEAF } }],
      MaxReplicas: LEAF,
      Platforms: [{ Architecture: LEAF, OS: LEAF }],
    },
    ForceUpdate: LEAF,
    Runtime: LEAF,
    Networks: NETWORK_ATTACHMENT,
    LogDriver: DRIVER,
  },
  Mode: { Replicated: { Replicas: LEAF }, Global: {}, ReplicatedJob: { MaxConcurrent: LEAF, TotalCompletions: LEAF }, GlobalJob: {} },
  UpdateConfig: UPDATE_CONFIG,
  RollbackConfig: UPDATE_CONFIG,
  Networks: NETWORK_ATTACHMENT,
  EndpointSpec: { Mode: LEAF, Ports: [{ Name: LEAF, Protocol: LEAF, TargetPort: LEAF, PublishedPort: LEAF, PublishMode: LEAF }] },
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function walk(v: unknown, shape: Shape | typeof LEAF | typeof MAP | [Shape]): unknown {
  if (shape === LEAF || shape === MAP) return v;
  if (Array.isArray(shape)) return Array.isArray(v) ? v.map((x) => walk(x, shape[0])) : v;
  if (!isObject(v)) return v;
  const byFold = new Map(Object.keys(shape).map((k) => [k.toLowerCase(), k]));
  const out: Record<string, unknown> = {};
  // An exact match wins over a case-folded one, as in Go.
  const keys = Object.keys(v).sort((a, b) => Number(Object.hasOwn(shape, a)) - Number(Object.hasOwn(shape, b)));
  for (const key of keys) {
    const field = byFold.get(key.toLowerCase());
    if (field === undefined) continue;
    out[field] = walk(v[key], shape[field]!);
  }
  return out;
}

/** The spec with dockerd's field names; unknown fields are dropped, values are left as they are. */
export function canonicalServiceSpec(body: Record<string, unknown>): Record<string, unknown> {
  return walk(body, SERVICE_SPEC) as Record<string, unknown>;
}
