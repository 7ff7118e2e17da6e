import autocannon from 'autocannon';

/**
 * Request rate of one GET over a unix socket: `connections` keep-alive clients (autocannon, in this
 * process) for `seconds`. Only 2xx answers count; any error or other status fails the measurement.
 * An endpoint so slow that a timed round completes fewer than `minRequests` is measured instead by
 * the time `minRequests` requests take, so a slow engine still gets a figure.
 */

export interface RateResult {
  perSecond: number;
  ok: number;
  seconds: number;
}

async function once(socketPath: string, path: string, connections: number, limit: { duration: number } | { amount: number }): Promise<RateResult> {
  const result = await autocannon({
    url: `http://localhost${path}`,
    socketPath,
    connections,
    pipelining: 1,
    timeout: 60,
    headers: { host: 'docker' },
    ...limit,
  });
  const ok = result['2xx'];
  const problems = result.errors + result.timeouts + result.non2xx;
  if (problems > 0 || ok === 0) {
    throw new Error(`GET ${path}: ${ok} ok, ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
  return { perSecond: ok / result.duration, ok, seconds: result.duration };
}

export async function requestRate(
  socketPath: string,
  path: string,
  opts: { connections: number; seconds: number; minRequests?: number },
): Promise<RateResult> {
  const min = opts.minRequests ?? opts.connections * 4;
  let timed: RateResult | undefined;
  try {
    timed = await once(socketPath, path, opts.connections, { duration: opts.seconds });
  } catch (err) {
    // Zero answers within the round is the slow case; anything else is a real failure.
    if (!/: 0 ok, 0 non-2xx, 0 errors/.test((err as Error).message)) throw err;
  }
  if (timed && timed.ok >= min) return timed;
  return once(socketPath, path, opts.connections, { amount: min });
}
