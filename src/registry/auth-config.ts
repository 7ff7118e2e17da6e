/**
 * Registry credentials as clients send them: the `X-Registry-Auth` header (base64 JSON) on pulls
 * and pushes, and the JSON body of `POST /auth`.
 */

export interface AuthConfig {
  username?: string;
  password?: string;
  /** base64(`user:pass`); expanded into username/password when those are missing. */
  auth?: string;
  email?: string;
  serveraddress?: string;
  /** OAuth2 refresh token from an earlier login. */
  identitytoken?: string;
  /** A bearer token handed straight to the registry. */
  registrytoken?: string;
}

const FIELDS = ['username', 'password', 'auth', 'email', 'serveraddress', 'identitytoken', 'registrytoken'] as const;

/**
 * Decodes an `X-Registry-Auth` value. Lenient like dockerd: both base64 alphabets, padding optional,
 * keys matched case-insensitively (docker-py sends `Username`). Anything empty or undecodable is
 * anonymous (undefined), because dockerd ignores a bad header on pull.
 */
export function decodeRegistryAuth(header: string | undefined): AuthConfig | undefined {
  if (header === undefined) return undefined;
  const text = header.trim();
  if (text === '') return undefined;
  let json: unknown;
  try {
    // Node's base64 decoder takes both the standard and the URL-safe alphabet, padded or not.
    json = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
  } catch {
    return undefined;
  }
  return normalizeAuthConfig(json);
}

/** Encodes credentials the way the docker CLI does (base64url JSON). */
export function encodeRegistryAuth(auth: AuthConfig): string {
  return Buffer.from(JSON.stringify(auth)).toString('base64url');
}

/**
 * Turns a decoded JSON object (header or `POST /auth` body) into an AuthConfig: keys
 * case-insensitive, non-string values dropped, `auth` expanded. Undefined when nothing is set.
 */
export function normalizeAuthConfig(json: unknown): AuthConfig | undefined {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
  const out: AuthConfig = {};
  for (const [key, value] of Object.entries(json)) {
    const field = FIELDS.find((f) => f === key.toLowerCase());
    if (field !== undefined && typeof value === 'string' && value !== '') out[field] = value;
  }
  if (out.auth !== undefined && out.username === undefined && out.password === undefined) {
    const pair = Buffer.from(out.auth, 'base64').toString('utf8');
    const colon = pair.indexOf(':');
    if (colon > 0) {
      out.username = pair.slice(0, colon);
      out.password = pair.slice(colon + 1);
    }
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** True when the config carries something a registry can check. */
export function hasCredentials(auth: AuthConfig | undefined): auth is AuthConfig {
  return auth !== undefined && (auth.username !== undefined || auth.identitytoken !== undefined || auth.registrytoken !== undefined);
}
