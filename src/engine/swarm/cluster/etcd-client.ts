/**
 * A client to the swarm's etcd members, with what a cluster whose links may be cut needs: a deadline
 * on every call (a cut link resets nothing, a call on it would wait for ever), connections of its own,
 * a failing member skipped for a second only and broken watches back within 2 s. Probe clients
 * (etcd-probes.ts) neither retry nor skip: each asks its one member and says what happened.
 */
import { circuitBreaker, ConsecutiveBreaker, ExponentialBackoff, handleWhen, isBrokenCircuitError, noop, retry, type IBackoffFactory, type IRetryBackoffContext } from 'cockatiel';
import { Etcd3, isRecoverableError } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage } from '../../../lib/errors.js';
import { PROBE_DEADLINE_MS } from './etcd-probes.js';

/** How long a call may take before the client gives up on that member. */
export const CALL_DEADLINE_MS = 10_000;
/**
 * The watch client's gRPC keep-alive: a ping this often while the watch stream is open (etcd's least
 * allowed interval, --grpc-keepalive-min-time), the connection closed when one is unanswered this long.
 * Without it the stream outlived a cut on its dead connection and, after the link was back, delivered
 * nothing until TCP's backed-off retransmission got through: 13 s after a 44 s cut, longer after longer
 * ones. The other calls and streams keep a client without pings: etcd3 closes a client's connections
 * after a failed call, and a ping on one closed that way fails, dropping the streams still on it.
 */
const KEEPALIVE_MS = 5000;
/** How long a member that failed 3 calls in a row is skipped. */
const SKIP_MS = 1000;

/**
 * The retry's wait: none after a failed call (it goes to another member), the rest of the skip when
 * every member was being skipped (a retry at once would be refused too: a member that failed while
 * etcd started, or under a load that timed calls out, made an API call fail with "circuit breaker is
 * open" though it answered a second later).
 */
const retryWait: IBackoffFactory<IRetryBackoffContext<unknown>> = {
  next: (ctx) => ({ duration: 'error' in ctx.result && isBrokenCircuitError(ctx.result.error) ? SKIP_MS + 100 : 0, next: retryWait.next }),
};

export interface EtcdAccess {
  endpoints: string[];
  ca: string;
  cert: string;
  key: string;
}

/** `use`: 'probe' for a member probe, 'watch' for the watches' own client (pinged), 'calls' for the rest. */
export function connectEtcd(access: EtcdAccess, hosts: string[], use: 'calls' | 'watch' | 'probe' = 'calls'): Etcd3 {
  const probe = use === 'probe';
  const deadline = probe ? PROBE_DEADLINE_MS : CALL_DEADLINE_MS;
  return new Etcd3({
    hosts,
    credentials: { rootCertificate: Buffer.from(access.ca), certChain: Buffer.from(access.cert), privateKey: Buffer.from(access.key) },
    dialTimeout: probe ? PROBE_DEADLINE_MS : 3000,
    defaultCallOptions: (call) => (call.isStream ? {} : { deadline: Date.now() + deadline }),
    // Connections of its own (grpc shares them between clients by default): a client replaced
    // because its member went silent must not hand its dead connection to the next one.
    grpcOptions: { 'grpc.use_local_subchannel_pool': 1, ...(use === 'watch' ? { 'grpc.keepalive_time_ms': KEEPALIVE_MS, 'grpc.keepalive_timeout_ms': KEEPALIVE_MS } : {}) },
    // A member that fails is skipped for a second only, and a broken watch is back within 2 s: a
    // node whose link returns must catch up in seconds, not after the client's 30 s default.
    faultHandling: probe
      ? { host: () => noop, global: noop }
      : {
          host: (host) => {
            const breaker = circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: SKIP_MS, breaker: new ConsecutiveBreaker(3) });
            breaker.onBreak((why) => log.debug('etcd member skipped for a second', { host, err: 'error' in why ? errorMessage(why.error) : 'a result' }));
            return breaker;
          },
          global: retry(handleWhen((err) => isRecoverableError(err) || isBrokenCircuitError(err)), { maxAttempts: 2, backoff: retryWait }),
          watchBackoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: 2000 }).next(),
        },
  });
}

/**
 * Leaves a stream (a watcher, a lease, an observer) of a client being replaced to die with it: no
 * more events from it, and its last error is swallowed (an EventEmitter without an error listener throws).
 */
export function silence(e: { removeAllListeners(): unknown; on(ev: string, fn: () => void): unknown } | undefined): void {
  e?.removeAllListeners();
  e?.on('error', () => undefined);
}
