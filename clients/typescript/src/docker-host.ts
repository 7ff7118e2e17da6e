/** Parses DOCKER_HOST values: unix:///path, tcp://host:port, http(s)://host:port, or a bare socket path. */

export const DEFAULT_HOST = 'unix:///run/berth/berth.sock';

export type DaemonAddress = { kind: 'unix'; socketPath: string } | { kind: 'tcp'; host: string; port: number };

const DEFAULT_TCP_PORT = 2375;
const DEFAULT_TLS_PORT = 2376;

export function parseDockerHost(value: string, tls = false): DaemonAddress {
  if (value.startsWith('/')) return { kind: 'unix', socketPath: value };
  const m = /^([a-z]+):\/\/(.*)$/.exec(value);
  if (!m) throw new Error(`unable to parse docker host "${value}"`);
  const [, scheme, rest] = m as unknown as [string, string, string];
  if (scheme === 'unix') {
    if (!rest.startsWith('/')) throw new Error(`unix host "${value}" needs an absolute socket path`);
    return { kind: 'unix', socketPath: rest };
  }
  if (scheme === 'tcp' || scheme === 'http' || scheme === 'https') {
    const url = new URL(`http://${rest}`);
    if (url.pathname !== '/' && url.pathname !== '') throw new Error(`docker host "${value}" must not carry a path`);
    const port = url.port ? Number(url.port) : tls || scheme === 'https' ? DEFAULT_TLS_PORT : DEFAULT_TCP_PORT;
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (!host) throw new Error(`docker host "${value}" has no host name`);
    return { kind: 'tcp', host, port };
  }
  throw new Error(`unsupported protocol "${scheme}" in docker host "${value}"`);
}
