import autocannon from 'autocannon';

/**
 * Request rate of one GET over a unix socket: `connections` keep-alive clients (autocannon, in this
 * process) for `seconds`. Only 2xx answers count; any error or other status fails the measurement.
 */

export interface RateResult {
  perSecond: number;
  ok: number;
  seconds: number;
}

export async function requestRate(socketPath: string, path: string, opts: { connections: number; seconds: number }): Promise<RateResult> {
  const result = await autocannon({
    url: `http://localhost${path}`,
    socketPath,
    connections: opts.connections,
    pipelining: 1,
    duration: opts.seconds,
    timeout: 30,
    headers: { host: 'docker' },
  });
  const ok = result['2xx'];
  const problems = result.errors + result.timeouts + result.non2xx;
  if (problems > 0 || ok === 0) {
    throw new Error(`GET ${path}: ${ok} ok, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  return { perSecond: ok / result.duration, ok, seconds: result.duration };
}
