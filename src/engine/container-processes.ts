/**
 * Runs a container's process: builds the OCI spec from the record, sets up its network, launches
 * it through the runtime driver, and reports its exit back to the container service.
 */
import type { ContainerRecord } from './container-model.js';

export interface ContainerProcesses {
  start(c: ContainerRecord, rootfs: string): Promise<{ pid: number }>;
  kill(c: ContainerRecord, signal: string): Promise<void>;
  pause(c: ContainerRecord): Promise<void>;
  resume(c: ContainerRecord): Promise<void>;
  /** Releases what start set up (runtime state, network); idempotent. */
  cleanup(c: ContainerRecord): Promise<void>;
}
