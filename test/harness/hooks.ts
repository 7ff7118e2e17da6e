import { after, afterEach, before } from 'node:test';
import { startDaemon, withLogTail, type DaemonOptions, type TestDaemon } from './daemon.js';
import { startRegistry, type RegistryKind, type RegistryOptions, type TestRegistry } from './registry.js';
import { seedRegistry, type SeededImages } from '../fixtures/seed-registry.js';

/**
 * node:test glue: call at the top of a test file (or inside describe) to get a resource started in
 * `before` and torn down in `after`. The returned getter throws if used before the hook ran.
 */

/** Also appends the daemon's log tail to the error of every failing test in scope. */
export function useDaemon(opts: DaemonOptions = {}): () => TestDaemon {
  let daemon: TestDaemon | undefined;
  before(async () => {
    daemon = await startDaemon(opts);
  });
  afterEach((t) => {
    const failure = (t as { passed?: boolean; error?: unknown }).passed === false ? (t as { error?: unknown }).error : undefined;
    if (daemon && failure instanceof Error) withLogTail(failure.cause instanceof Error ? failure.cause : failure, daemon);
  });
  after(async () => {
    await daemon?.teardown();
  });
  return () => {
    if (!daemon) throw new Error('useDaemon(): the daemon is not started (used outside a test, or startup failed)');
    return daemon;
  };
}

export interface SeededRegistry {
  registry: TestRegistry;
  seeded: SeededImages;
}

/** A registry of the given kind with the standard images pushed (busybox, layered, multiarch, zstd). */
export function useSeededRegistry(kind: RegistryKind = 'open', opts: RegistryOptions = {}): () => SeededRegistry {
  let value: SeededRegistry | undefined;
  let registry: TestRegistry | undefined;
  before(async () => {
    registry = await startRegistry(kind, opts);
    value = { registry, seeded: await seedRegistry(registry) };
  });
  after(async () => {
    await registry?.stop();
  });
  return () => {
    if (!value) throw new Error('useSeededRegistry(): the registry is not started');
    return value;
  };
}

/** The seeded registry's busybox, pulled into the daemon in `before`: the getter gives its reference. */
export function usePulledBusybox(daemon: () => TestDaemon, reg: () => SeededRegistry): () => string {
  let ref = '';
  before(async () => {
    ref = reg().seeded.refs.busybox;
    const r = await daemon().docker(['pull', '-q', ref]);
    if (r.code !== 0) throw new Error(`docker pull ${ref} failed: ${r.stderr}`);
  });
  return () => ref;
}
