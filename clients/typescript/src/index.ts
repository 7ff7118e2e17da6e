export { BerthClient, type ClientOptions, type LoginOptions } from './client.js';
export type { PingResult, CallOptions } from './api-caller.js';
export { CLIENT_API_VERSION, negotiatedVersion, compareVersions } from './api-version.js';
export {
  Container,
  Containers,
  type CommitOptions,
  type CreateOptions,
  type ListOptions,
  type LogsOptions,
  type PendingWait,
  type RemoveOptions,
  type RunOptions,
  type StopOptions,
  type WaitOptions,
} from './containers.js';
export { Images, type ImageListOptions, type ImageRemoveOptions, type PullOptions } from './images.js';
export {
  BerthApiError,
  BadRequestError,
  ConflictError,
  ContainerError,
  ForbiddenError,
  NotFoundError,
  ServerError,
  StreamError,
  UnauthorizedError,
} from './errors.js';
export { demultiplex, MultiplexError, type OutputChunk, type OutputStream } from './multiplexed-stream.js';
export { readJsonLines } from './json-lines.js';
export { connectionFromEnv, readCertDir, type ConnectionSettings, type TlsSettings } from './environment.js';
export { DEFAULT_HOST, parseDockerHost, type DaemonAddress } from './docker-host.js';
export { encodeRegistryAuth, resolveCredentials, storeCredentials, readDockerConfig } from './registry-credentials.js';
export { CredentialHelperError } from './credential-helper.js';
export { parseReference, registryHost, authKey } from './image-reference.js';
export type * from './models.js';
