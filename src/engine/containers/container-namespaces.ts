/**
 * PidMode, UTSMode and IpcMode as dockerd reads them: checked and normalised at create (a
 * `container:<name>` target is stored by id, so a rename keeps the link), turned into namespaces to
 * create or join (and the /dev/shm that goes with the IPC mode) at start.
 */
import { conflict, invalidArgument, notFound } from '../../lib/errors.js';
import type { ContainerRecord, HostConfig } from './container-model.js';

export type ContainerLookup = (idOrName: string) => ContainerRecord | undefined;

const PREFIX = 'container:';
const targetOf = (mode: unknown): string | undefined => (typeof mode === 'string' && mode.startsWith(PREFIX) ? mode.slice(PREFIX.length) : undefined);

const IPC_MODES = ['', 'none', 'private', 'host', 'shareable'];

/** dockerd's create-time checks (texts of its Valid() errors). */
export function validateNamespaceModes(hc: HostConfig, hostnameGiven: boolean): void {
  const ipc = hc.IpcMode ?? '';
  if (typeof ipc !== 'string' || (!IPC_MODES.includes(ipc) && !targetOf(ipc))) throw invalidArgument(`invalid IPC mode: ${String(ipc)}`);
  const pid = hc.PidMode ?? '';
  if (typeof pid !== 'string' || !(pid === '' || pid === 'host' || targetOf(pid))) throw invalidArgument(`invalid PID mode: ${String(pid)}`);
  const uts = hc.UTSMode ?? '';
  if (typeof uts !== 'string' || !(uts === '' || uts === 'host')) throw invalidArgument(`invalid UTS mode: ${String(uts)}`);
  if (uts === 'host' && hostnameGiven) throw invalidArgument('conflicting options: hostname and the UTS mode');
}

/**
 * The stored modes: IpcMode defaults to dockerd's `private`; `container:<name>` becomes
 * `container:<id>`, and an unknown target is refused at create, as dockerd does.
 */
export function normalizeNamespaceModes(hc: HostConfig, lookup: ContainerLookup): HostConfig {
  const out: HostConfig = { ...hc, IpcMode: (hc.IpcMode as string) || 'private' };
  for (const field of ['PidMode', 'IpcMode'] as const) {
    const target = targetOf(out[field]);
    if (target === undefined) continue;
    const c = lookup(target);
    if (!c) throw notFound(`No such container: ${target}`);
    out[field] = PREFIX + c.id;
  }
  return out;
}

export interface NamespacePlan {
  namespaces: { type: string; path?: string }[];
  /** The container's /dev/shm when it is not its own tmpfs: a host path to bind. */
  shmSource?: string;
  /** IpcMode none: no /dev/shm at all. */
  omitShm: boolean;
}

/**
 * The pid, ipc and uts namespaces of a container about to start. `shmOf` names the host dir of a
 * shareable container's /dev/shm.
 */
export function namespacePlan(c: ContainerRecord, lookup: ContainerLookup, shmOf: (id: string) => string): NamespacePlan {
  const hc = c.hostConfig;
  const namespaces: { type: string; path?: string }[] = [];
  let shmSource: string | undefined;

  const pid = (hc.PidMode as string) || '';
  if (targetOf(pid) !== undefined) namespaces.push({ type: 'pid', path: `/proc/${donorPid(targetOf(pid)!, 'PID', lookup)}/ns/pid` });
  else if (pid !== 'host') namespaces.push({ type: 'pid' });

  const ipc = (hc.IpcMode as string) || 'private';
  const ipcTarget = targetOf(ipc);
  if (ipcTarget !== undefined) {
    const donor = donorPid(ipcTarget, 'IPC', lookup);
    shmSource = donorShm(lookup(ipcTarget)!, lookup, shmOf);
    // dockerd lets a container join only a donor whose /dev/shm can be shared.
    if (!shmSource) throw invalidArgument(`failed to join IPC namespace: container ${ipcTarget}: non-shareable IPC (hint: use IpcMode:shareable for the donor container)`);
    namespaces.push({ type: 'ipc', path: `/proc/${donor}/ns/ipc` });
  } else if (ipc === 'shareable') {
    namespaces.push({ type: 'ipc' });
    shmSource = shmOf(c.id);
  } else if (ipc === 'host') {
    shmSource = '/dev/shm';
  } else {
    namespaces.push({ type: 'ipc' });
  }

  if (hc.UTSMode !== 'host') namespaces.push({ type: 'uts' });
  return { namespaces, shmSource, omitShm: ipc === 'none' };
}

/** The /dev/shm a donor shares: its own (shareable), the host's, or its donor's; undefined if private. */
function donorShm(donor: ContainerRecord, lookup: ContainerLookup, shmOf: (id: string) => string, hops = 0): string | undefined {
  const mode = (donor.hostConfig.IpcMode as string) || '';
  if (mode === 'host') return '/dev/shm';
  if (mode === 'shareable') return shmOf(donor.id);
  const next = targetOf(mode) !== undefined && hops < 8 ? lookup(targetOf(mode)!) : undefined;
  return next ? donorShm(next, lookup, shmOf, hops + 1) : undefined;
}

/** The pid of a running container whose namespace is joined; dockerd's errors otherwise. */
function donorPid(target: string, kind: 'PID' | 'IPC', lookup: ContainerLookup): number {
  const d = lookup(target);
  if (!d) throw invalidArgument(`failed to join ${kind} namespace: No such container: ${target}`);
  if (d.state.status === 'restarting') throw conflict(`failed to join ${kind} namespace: Container ${target} is restarting, wait until the container is running`);
  if ((d.state.status !== 'running' && d.state.status !== 'paused') || !d.state.pid) throw conflict(`failed to join ${kind} namespace: container ${target} is not running`);
  return d.state.pid;
}
