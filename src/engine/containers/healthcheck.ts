/**
 * Healthchecks: while a container with a Config.Healthcheck runs, its probe runs inside it (an
 * exec through the runtime) every Interval (every StartInterval during the start period). The
 * outcome goes to State.Health: the last 5 results, the run of failures, and the status, which
 * turns unhealthy after Retries failures in a row (failures inside the start period do not count)
 * and healthy after one success. A status change is a `health_status: <status>` event.
 *
 * The monitor follows the container's own events ('start', 'die', 'destroy'), so the container
 * service needs no hook for it.
 */
import type { Readable } from 'node:stream';
import { waitAtMost } from '../../lib/deadline.js';
import { randomHex } from '../../lib/random-hex.js';
import { log } from '../../lib/log.js';
import type { RuntimeDriver } from '../../runtime/runtime-driver.js';
import type { ContainerRecord, HealthState } from './container-model.js';
import type { ContainerService } from './container-service.js';
import type { EngineEvent } from '../events.js';

const NS_PER_MS = 1_000_000;
const DEFAULT_INTERVAL_NS = 30e9;
const DEFAULT_TIMEOUT_NS = 30e9;
const DEFAULT_START_INTERVAL_NS = 5e9;
const DEFAULT_RETRIES = 3;
const MAX_LOG_ENTRIES = 5;
const MAX_OUTPUT = 4096;
/** How long a probe's output may still be read after its exit: dockerd's wait for an exec's streams. */
const STREAM_WAIT_MS = 2000;

export interface HealthProbe {
  test: string[];
  intervalMs: number;
  timeoutMs: number;
  startPeriodMs: number;
  startIntervalMs: number;
  retries: number;
}

/** The probe a container's config asks for; undefined for none (no Test, or ["NONE"]). */
export function probeOf(c: ContainerRecord): HealthProbe | undefined {
  const h = c.config.Healthcheck;
  if (!h?.Test?.length || h.Test[0] === 'NONE') return undefined;
  let test: string[];
  if (h.Test[0] === 'CMD') test = h.Test.slice(1);
  else if (h.Test[0] === 'CMD-SHELL') test = [...(c.config.Shell?.length ? c.config.Shell : ['/bin/sh', '-c']), h.Test.slice(1).join(' ')];
  else test = h.Test; // dockerd's old form: the command itself
  if (test.length === 0) return undefined;
  const ms = (ns: number | undefined, dflt: number) => Math.max(1, Math.round((ns || dflt) / NS_PER_MS));
  return {
    test,
    intervalMs: ms(h.Interval, DEFAULT_INTERVAL_NS),
    timeoutMs: ms(h.Timeout, DEFAULT_TIMEOUT_NS),
    startPeriodMs: Math.round((h.StartPeriod ?? 0) / NS_PER_MS),
    startIntervalMs: ms(h.StartInterval, DEFAULT_START_INTERVAL_NS),
    retries: h.Retries && h.Retries > 0 ? h.Retries : DEFAULT_RETRIES,
  };
}

interface Running {
  timer?: NodeJS.Timeout;
  stopped: boolean;
  /** The probe in flight, so stop() can end it. */
  probePid?: number;
}

export class HealthMonitor {
  readonly #running = new Map<string, Running>();
  #unsubscribe?: () => void;

  constructor(
    private readonly containers: ContainerService,
    private readonly runtime: RuntimeDriver,
  ) {}

  /** Follows container events, and monitors the containers already running (after a daemon restart). */
  start(): void {
    this.#unsubscribe = this.containers.events.subscribe((ev: EngineEvent) => {
      if (ev.Type !== 'container') return;
      if (ev.Action === 'start') this.#watch(ev.Actor.ID);
      else if (ev.Action === 'die' || ev.Action === 'destroy') this.#unwatch(ev.Actor.ID);
    });
    for (const c of this.containers.all()) if (c.state.status === 'running' || c.state.status === 'paused') this.#watch(c.id);
  }

  stop(): void {
    this.#unsubscribe?.();
    for (const id of [...this.#running.keys()]) this.#unwatch(id);
  }

  #watch(id: string): void {
    const c = this.containers.find(id);
    if (!c) return;
    this.#unwatch(id);
    const probe = probeOf(c);
    if (!probe) return;
    if (!c.state.health || c.state.health.status === 'none') c.state.health = { status: 'starting', failingStreak: 0, log: [] };
    const r: Running = { stopped: false };
    this.#running.set(id, r);
    const schedule = () => {
      if (r.stopped) return;
      const inStart = c.state.health?.status === 'starting' && Date.now() < Date.parse(c.state.startedAt) + probe.startPeriodMs;
      r.timer = setTimeout(() => void tick(), inStart ? probe.startIntervalMs : probe.intervalMs);
      r.timer.unref();
    };
    const tick = async () => {
      if (r.stopped) return;
      if (c.state.status === 'running') {
        try {
          await this.#probeOnce(c, probe, r);
        } catch (err) {
          log.warn('healthcheck failed to run', { id, err });
        }
      }
      schedule();
    };
    schedule();
  }

  #unwatch(id: string): void {
    const r = this.#running.get(id);
    if (!r) return;
    r.stopped = true;
    if (r.timer) clearTimeout(r.timer);
    if (r.probePid) killQuietly(r.probePid);
    this.#running.delete(id);
  }

  async #probeOnce(c: ContainerRecord, probe: HealthProbe, r: Running): Promise<void> {
    const start = new Date();
    const result = await this.#exec(c, probe, r);
    if (r.stopped) return; // the container stopped meanwhile: its probe result means nothing
    const health: HealthState = c.state.health ?? { status: 'starting', failingStreak: 0, log: [] };
    health.log = [...health.log, { Start: start.toISOString(), End: new Date().toISOString(), ExitCode: result.exitCode, Output: result.output }].slice(-MAX_LOG_ENTRIES);
    const before = health.status;
    if (result.exitCode === 0) {
      health.failingStreak = 0;
      health.status = 'healthy';
    } else {
      const inStartPeriod = Date.now() < Date.parse(c.state.startedAt) + probe.startPeriodMs;
      // During the start period a failure is only recorded, unless the container was healthy already.
      if (!(inStartPeriod && before === 'starting')) {
        health.failingStreak++;
        if (health.failingStreak >= probe.retries) health.status = 'unhealthy';
      }
    }
    c.state.health = health;
    this.containers.save(c);
    if (health.status !== before) this.containers.events.publish('container', `health_status: ${health.status}`, c.id, this.containers.attrs(c));
  }

  /** Runs the probe command; exit code -1 with dockerd's message on timeout. */
  async #exec(c: ContainerRecord, probe: HealthProbe, r: Running): Promise<{ exitCode: number; output: string }> {
    let session;
    try {
      session = await this.runtime.execs.exec(c.id, {
        execId: `health-${randomHex(8)}`,
        process: { args: probe.test, env: [], terminal: false },
        stdin: false,
        combinedOutput: true,
      });
    } catch (err) {
      return { exitCode: -1, output: (err as Error).message };
    }
    r.probePid = session.pid || undefined;
    let output = '';
    const collect = (s: Readable | undefined) =>
      new Promise<void>((resolve) => {
        if (!s) return resolve();
        s.on('data', (d: Buffer) => {
          if (output.length < MAX_OUTPUT) output += d.toString('utf8');
        });
        s.on('end', resolve);
        s.on('error', () => resolve());
        s.on('close', resolve);
      });
    const streams = Promise.all([collect(session.stdout), collect(session.stderr)]);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), probe.timeoutMs);
      timer.unref();
    });
    const outcome = await Promise.race([session.exit, timedOut]);
    clearTimeout(timer);
    r.probePid = undefined;
    if (outcome === 'timeout') {
      if (session.pid) killQuietly(session.pid);
      session.stdout?.destroy();
      session.stderr?.destroy();
      return { exitCode: -1, output: `Health check exceeded timeout (${formatDuration(probe.timeoutMs)})` };
    }
    // The output pipes end once every holder has closed them. A probe that left a child behind
    // holding them must not stall the monitor: as dockerd (which waits 2 s for an exec's streams
    // after its exit, then closes them), the output is read up to then.
    if (!(await waitAtMost(streams, STREAM_WAIT_MS))) {
      session.stdout?.destroy();
      session.stderr?.destroy();
    }
    if (outcome.error && !output) output = outcome.error;
    return { exitCode: outcome.exitCode, output: output.slice(0, MAX_OUTPUT) };
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Go's duration formatting for the common cases: 30s, 1.5s, 500ms, 2m0s. */
function formatDuration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60_000) return `${ms / 1000}s`;
  const m = Math.floor(ms / 60_000);
  const s = (ms % 60_000) / 1000;
  return m < 60 ? `${m}m${s}s` : `${Math.floor(m / 60)}h${m % 60}m${s}s`;
}
