/**
 * Request and response shapes of the Engine API (v1.55) for the operations this client offers.
 * Field names are the wire names. The API is open: daemons may send fields not listed here.
 */

// ---- containers -------------------------------------------------------------------------------

export interface HealthConfig {
  Test?: string[];
  Interval?: number;
  Timeout?: number;
  Retries?: number;
  StartPeriod?: number;
  StartInterval?: number;
}

/** Configuration of a container that does not depend on the host (also the image config). */
export interface ContainerConfig {
  Hostname?: string;
  Domainname?: string;
  User?: string;
  AttachStdin?: boolean;
  AttachStdout?: boolean;
  AttachStderr?: boolean;
  ExposedPorts?: Record<string, Record<string, never>>;
  Tty?: boolean;
  OpenStdin?: boolean;
  StdinOnce?: boolean;
  Env?: string[];
  Cmd?: string[];
  Healthcheck?: HealthConfig;
  ArgsEscaped?: boolean;
  Image?: string;
  Volumes?: Record<string, Record<string, never>>;
  WorkingDir?: string;
  Entrypoint?: string[];
  NetworkDisabled?: boolean;
  OnBuild?: string[];
  Labels?: Record<string, string>;
  StopSignal?: string;
  StopTimeout?: number;
  Shell?: string[];
}

export interface PortBinding {
  HostIp?: string;
  HostPort?: string;
}

export interface Mount {
  Target: string;
  Source?: string;
  Type: 'bind' | 'volume' | 'tmpfs' | 'image' | 'npipe' | 'cluster';
  ReadOnly?: boolean;
}

export interface RestartPolicy {
  Name?: '' | 'no' | 'always' | 'unless-stopped' | 'on-failure';
  MaximumRetryCount?: number;
}

/** The host-dependent part of a container's configuration. */
export interface HostConfig {
  Binds?: string[];
  NetworkMode?: string;
  PortBindings?: Record<string, PortBinding[]>;
  RestartPolicy?: RestartPolicy;
  AutoRemove?: boolean;
  Mounts?: Mount[];
  Privileged?: boolean;
  ReadonlyRootfs?: boolean;
  CapAdd?: string[];
  CapDrop?: string[];
  Dns?: string[];
  ExtraHosts?: string[];
  SecurityOpt?: string[];
  Tmpfs?: Record<string, string>;
  ShmSize?: number;
  Memory?: number;
  NanoCpus?: number;
  PidsLimit?: number;
  Init?: boolean;
  LogConfig?: { Type?: string; Config?: Record<string, string> };
}

export interface EndpointSettings {
  Aliases?: string[];
  NetworkID?: string;
  EndpointID?: string;
  Gateway?: string;
  IPAddress?: string;
  IPPrefixLen?: number;
  MacAddress?: string;
}

export interface NetworkingConfig {
  EndpointsConfig?: Record<string, EndpointSettings>;
}

/** Body of POST /containers/create. */
export interface ContainerCreateRequest extends ContainerConfig {
  HostConfig?: HostConfig;
  NetworkingConfig?: NetworkingConfig;
}

export interface ContainerCreateResponse {
  Id: string;
  Warnings: string[];
}

export interface Port {
  IP?: string;
  PrivatePort: number;
  PublicPort?: number;
  Type: 'tcp' | 'udp' | 'sctp';
}

/** One entry of GET /containers/json. */
export interface ContainerSummary {
  Id: string;
  Names: string[];
  Image: string;
  ImageID: string;
  Command: string;
  Created: number;
  Ports: Port[];
  Labels: Record<string, string>;
  State: 'created' | 'running' | 'paused' | 'restarting' | 'exited' | 'removing' | 'dead';
  Status: string;
  HostConfig?: { NetworkMode?: string };
  NetworkSettings?: { Networks?: Record<string, EndpointSettings> };
  SizeRw?: number;
  SizeRootFs?: number;
}

export interface ContainerState {
  Status: ContainerSummary['State'];
  Running: boolean;
  Paused: boolean;
  Restarting: boolean;
  OOMKilled: boolean;
  Dead: boolean;
  Pid: number;
  ExitCode: number;
  Error: string;
  StartedAt: string;
  FinishedAt: string;
}

/** GET /containers/{id}/json */
export interface ContainerInspect {
  Id: string;
  Created: string;
  Path: string;
  Args: string[];
  State: ContainerState;
  Image: string;
  Name: string;
  RestartCount: number;
  Driver: string;
  Platform: string;
  HostConfig: HostConfig;
  Config: ContainerConfig;
  NetworkSettings: { Networks?: Record<string, EndpointSettings>; Ports?: Record<string, PortBinding[] | null> };
  Mounts: Array<{ Type: string; Source: string; Destination: string; RW: boolean; Name?: string }>;
  LogPath?: string;
}

/** POST /containers/{id}/wait */
export interface ContainerWaitResponse {
  StatusCode: number;
  Error?: { Message?: string } | null;
}

export type WaitCondition = 'not-running' | 'next-exit' | 'removed';

/** POST /commit, and any reply that is just an ID. */
export interface IdResponse {
  Id: string;
}

// ---- images -----------------------------------------------------------------------------------

/** One entry of GET /images/json. */
export interface ImageSummary {
  Id: string;
  ParentId: string;
  RepoTags: string[];
  RepoDigests: string[];
  Created: number;
  Size: number;
  SharedSize: number;
  VirtualSize?: number;
  Labels: Record<string, string> | null;
  Containers: number;
}

/** GET /images/{name}/json */
export interface ImageInspect {
  Id: string;
  RepoTags: string[];
  RepoDigests: string[];
  Parent?: string;
  Comment?: string;
  Created?: string;
  Author?: string;
  Config?: ContainerConfig;
  Architecture: string;
  Variant?: string;
  Os: string;
  OsVersion?: string;
  Size: number;
  RootFS: { Type: string; Layers?: string[] };
  Metadata?: { LastTagTime?: string | null };
}

/** One record of DELETE /images/{name}. */
export interface ImageDeleteResponseItem {
  Untagged?: string;
  Deleted?: string;
}

/** One record of a progress stream (pull, push). */
export interface ProgressMessage {
  id?: string;
  status?: string;
  progress?: string;
  progressDetail?: { current?: number; total?: number };
  aux?: Record<string, unknown>;
  /** Present only on failure; the client turns such a record into a StreamError. */
  error?: string;
  errorDetail?: { code?: number; message?: string };
}

// ---- system -----------------------------------------------------------------------------------

/** Credentials for a registry, as sent in X-Registry-Auth and to POST /auth. */
export interface AuthConfig {
  username?: string;
  password?: string;
  /** base64(username:password), as kept in config.json. */
  auth?: string;
  email?: string;
  serveraddress?: string;
  /** An OAuth refresh token the daemon exchanges for access tokens. */
  identitytoken?: string;
  /** A bearer token passed to the registry as is. */
  registrytoken?: string;
}

/** POST /auth */
export interface AuthResponse {
  Status: string;
  IdentityToken?: string;
}

/** GET /version */
export interface VersionResponse {
  Platform?: { Name: string };
  Components?: Array<{ Name: string; Version: string; Details?: Record<string, string> }>;
  Version: string;
  ApiVersion: string;
  MinAPIVersion?: string;
  GitCommit?: string;
  GoVersion?: string;
  Os: string;
  Arch: string;
  KernelVersion?: string;
  Experimental?: boolean;
  BuildTime?: string;
}
