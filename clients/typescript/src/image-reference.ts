/** Just enough image-reference parsing for pulls and credential lookup. */

export interface ParsedReference {
  /** Everything before the tag or digest, e.g. "127.0.0.1:5000/team/app" or "busybox". */
  repository: string;
  tag?: string;
  digest?: string;
}

export const DOCKER_HUB = 'docker.io';
/** The key Docker Hub credentials are stored under in config.json and credential helpers. */
export const DOCKER_HUB_AUTH_KEY = 'https://index.docker.io/v1/';

export function parseReference(ref: string): ParsedReference {
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at !== -1) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  if (!rest) throw new Error(`invalid reference format: "${ref}"`);
  return { repository: rest, ...(tag !== undefined && { tag }), ...(digest !== undefined && { digest }) };
}

/** The registry host of a repository: its first component when that looks like a host, else Docker Hub. */
export function registryHost(repository: string): string {
  const slash = repository.indexOf('/');
  if (slash === -1) return DOCKER_HUB;
  const first = repository.slice(0, slash);
  if (first.includes('.') || first.includes(':') || first === 'localhost') {
    return first === 'index.docker.io' || first === 'registry-1.docker.io' ? DOCKER_HUB : first;
  }
  return DOCKER_HUB;
}

/** Where credentials for a registry host are kept: Docker Hub has its historical URL, others their host. */
export function authKey(host: string): string {
  return host === DOCKER_HUB ? DOCKER_HUB_AUTH_KEY : host;
}

/** Reduces a config.json key ("https://host:5000/v1/", "host:5000") to a registry host. */
export function hostOfAuthKey(key: string): string {
  const host = key.replace(/^[a-z]+:\/\//i, '').split('/')[0]!;
  return host === 'index.docker.io' || host === 'registry-1.docker.io' ? DOCKER_HUB : host;
}
