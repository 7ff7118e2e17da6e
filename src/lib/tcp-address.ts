/**
 * `tcp://host:port` daemon addresses as dockerd reads them: an empty host means every interface
 * (0.0.0.0), IPv6 hosts are bracketed, and a missing port is 2376 with TLS, 2375 without.
 */
import { isIP } from 'node:net';

export interface TcpAddress {
  /** Host or IP to bind, without brackets. */
  host: string;
  port: number;
}

export function parseTcpAddress(address: string, tls: boolean): TcpAddress {
  const bad = (why: string) => new Error(`invalid tcp address ${JSON.stringify(address)}: ${why}`);
  if (!address.startsWith('tcp://')) throw bad('expected tcp://host:port');
  const rest = address.slice('tcp://'.length).replace(/\/+$/, '');
  if (rest.includes('/')) throw bad('a path is not allowed');
  let host: string;
  let portText: string | undefined;
  if (rest.startsWith('[')) {
    const close = rest.indexOf(']');
    if (close < 0) throw bad('unclosed [');
    host = rest.slice(1, close);
    const after = rest.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) throw bad('expected :port after ]');
    portText = after === '' ? undefined : after.slice(1);
    if (isIP(host) !== 6) throw bad('not an IPv6 address in brackets');
  } else {
    const colon = rest.lastIndexOf(':');
    if (colon >= 0 && rest.indexOf(':') !== colon) throw bad('IPv6 addresses must be in brackets');
    host = colon >= 0 ? rest.slice(0, colon) : rest;
    portText = colon >= 0 ? rest.slice(colon + 1) : undefined;
  }
  const port = portText === undefined || portText === '' ? (tls ? 2376 : 2375) : Number(portText);
  if (!/^\d*$/.test(portText ?? '') || !Number.isInteger(port) || port < 1 || port > 65535) throw bad(`invalid port ${JSON.stringify(portText)}`);
  return { host: host === '' ? '0.0.0.0' : host, port };
}

/** `tcp://host:port`, with IPv6 hosts bracketed: how listeners are named in logs. */
export function formatTcpAddress(a: TcpAddress): string {
  return `tcp://${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`;
}
