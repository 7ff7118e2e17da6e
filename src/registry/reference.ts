/**
 * Image references (`name[:tag][@digest]`), normalized the way dockerd does it so that
 * `busybox`, `library/busybox` and `docker.io/library/busybox:latest` all name the same thing.
 */
import { invalidArgument } from '../lib/errors.js';
import { isDigest, type Digest } from '../lib/digest.js';

export interface Reference {
  /** Registry host as written (`docker.io` for Docker Hub), with `:port` when given. */
  domain: string;
  /** Repository path inside the registry, e.g. `library/busybox`. */
  path: string;
  tag?: string;
  digest?: Digest;
}

export const DOCKER_HUB_DOMAIN = 'docker.io';
const LEGACY_HUB_DOMAIN = 'index.docker.io';
const OFFICIAL_PREFIX = 'library/';
const MAX_NAME_LENGTH = 255;

// Grammar from the distribution reference format (facts, reimplemented here).
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_NAME = /^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*$/;
const IPV6_HOST = /^\[[a-fA-F0-9:.]+(?:%[a-zA-Z0-9]+)?\]$/;
const PORT = /^[0-9]+$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST_SHAPE = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$/;
const HEX64 = /^[a-f0-9]{64}$/;

const FORMAT_ERROR = 'invalid reference format';

export interface ParseReferenceOptions {
  /** Add tag `latest` when neither tag nor digest is given (default true). */
  defaultTag?: boolean;
}

/**
 * Parses and normalizes a reference. Throws BerthError invalid-argument with dockerd's wording.
 * A bare 64-hex string is refused: callers look up image ids before calling this.
 */
export function parseReference(s: string, opts: ParseReferenceOptions = {}): Reference {
  if (s === '') throw invalidArgument(`${FORMAT_ERROR}: repository name must have at least one component`);
  if (HEX64.test(s)) throw invalidArgument(`invalid repository name (${s}), cannot specify 64-byte hexadecimal strings`);

  let rest = s;
  let digest: Digest | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    const d = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST_SHAPE.test(d)) throw invalidArgument(FORMAT_ERROR);
    if (!isDigest(d)) throw invalidArgument(`${FORMAT_ERROR}: unsupported digest algorithm or malformed digest ${d}`);
    digest = d;
  }

  // A tag follows the last ':' that comes after the last '/' (a ':' before it is a port).
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw invalidArgument(FORMAT_ERROR);
  }

  let { domain, path } = splitDomain(rest);
  if (domain !== undefined && !isValidDomain(domain)) throw invalidArgument(FORMAT_ERROR);
  if (domain === undefined || domain === LEGACY_HUB_DOMAIN) domain = DOCKER_HUB_DOMAIN;
  if (domain === DOCKER_HUB_DOMAIN && !path.includes('/') && path !== '') path = OFFICIAL_PREFIX + path;
  if (path.toLowerCase() !== path) {
    throw invalidArgument(`${FORMAT_ERROR}: repository name (${path}) must be lowercase`);
  }
  if (path === '' || !path.split('/').every((c) => PATH_COMPONENT.test(c))) throw invalidArgument(FORMAT_ERROR);

  if (domain.length + 1 + path.length > MAX_NAME_LENGTH) {
    throw invalidArgument(`${FORMAT_ERROR}: repository name must not be more than ${MAX_NAME_LENGTH} characters`);
  }

  if (tag === undefined && digest === undefined && (opts.defaultTag ?? true)) tag = 'latest';
  const ref: Reference = { domain, path };
  if (tag !== undefined) ref.tag = tag;
  if (digest !== undefined) ref.digest = digest;
  return ref;
}

/** Like parseReference, but returns undefined instead of throwing. */
export function tryParseReference(s: string, opts?: ParseReferenceOptions): Reference | undefined {
  try {
    return parseReference(s, opts);
  } catch {
    return undefined;
  }
}

function splitDomain(name: string): { domain: string | undefined; path: string } {
  const slash = name.indexOf('/');
  if (slash < 0) return { domain: undefined, path: name };
  const first = name.slice(0, slash);
  if (first.includes('.') || first.includes(':') || first === 'localhost' || first.startsWith('[')) {
    return { domain: first, path: name.slice(slash + 1) };
  }
  return { domain: undefined, path: name };
}

function isValidDomain(domain: string): boolean {
  let host = domain;
  let port: string | undefined;
  if (domain.startsWith('[')) {
    const close = domain.indexOf(']');
    if (close < 0) return false;
    host = domain.slice(0, close + 1);
    const after = domain.slice(close + 1);
    if (after !== '') {
      if (!after.startsWith(':')) return false;
      port = after.slice(1);
    }
    if (!IPV6_HOST.test(host)) return false;
  } else {
    const c = domain.indexOf(':');
    if (c >= 0) {
      host = domain.slice(0, c);
      port = domain.slice(c + 1);
    }
    if (!DOMAIN_NAME.test(host)) return false;
  }
  return port === undefined || PORT.test(port);
}

/** Short name as the docker CLI shows it: `busybox`, `user/app`, `localhost:5000/foo`. */
export function familiarName(ref: Reference): string {
  if (ref.domain === DOCKER_HUB_DOMAIN) {
    const rest = ref.path.startsWith(OFFICIAL_PREFIX) ? ref.path.slice(OFFICIAL_PREFIX.length) : ref.path;
    return rest.includes('/') ? ref.path : rest;
  }
  return `${ref.domain}/${ref.path}`;
}

/** Familiar name with tag and/or digest: `busybox:latest`, `busybox@sha256:…`. */
export function familiarString(ref: Reference): string {
  return familiarName(ref) + suffix(ref);
}

/** Fully qualified name: `docker.io/library/busybox`. */
export function fullName(ref: Reference): string {
  return `${ref.domain}/${ref.path}`;
}

/** Fully qualified name with tag and/or digest: `docker.io/library/busybox:latest`. */
export function fullString(ref: Reference): string {
  return fullName(ref) + suffix(ref);
}

function suffix(ref: Reference): string {
  return (ref.tag !== undefined ? `:${ref.tag}` : '') + (ref.digest !== undefined ? `@${ref.digest}` : '');
}
