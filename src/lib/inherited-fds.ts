/**
 * Descriptors berthd inherited without close-on-exec would otherwise pass to everything it starts
 * (conmon, the runtimes, etcd, aardvark-dns, the long-lived shells) and outlive berthd in them: a
 * pipe of the shell that started the daemon stays open as long as any container lives. berthd uses
 * no inherited descriptor above stderr (no socket activation: every listener is opened from -H), so
 * at start-up, before anything is spawned, those without O_CLOEXEC are closed. Node's own are all
 * close-on-exec; its IPC channel (NODE_CHANNEL_FD), when a Node parent opened one, is kept.
 */
import { closeSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** O_CLOEXEC as /proc/<pid>/fdinfo's octal `flags:` shows it. */
const O_CLOEXEC = 0o2000000;

export interface ClosedDescriptor {
  fd: number;
  target: string;
}

/** Closes the inherited descriptors above 2 that are not close-on-exec; returns what was closed. */
export function closeInheritedDescriptors(env: NodeJS.ProcessEnv = process.env): ClosedDescriptor[] {
  const keep = new Set<number>();
  const channel = Number(env.NODE_CHANNEL_FD);
  if (Number.isInteger(channel)) keep.add(channel);
  const closed: ClosedDescriptor[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 2 || keep.has(fd)) continue;
    const flags = fdFlags(fd);
    // undefined: gone meanwhile (the directory listing's own descriptor).
    if (flags === undefined || (flags & O_CLOEXEC) !== 0) continue;
    let target = '';
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      // closed meanwhile
    }
    try {
      closeSync(fd);
      closed.push({ fd, target });
    } catch {
      // EBADF: already gone
    }
  }
  return closed;
}

function fdFlags(fd: number): number | undefined {
  try {
    const m = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
    return m ? parseInt(m[1]!, 8) : undefined;
  } catch {
    return undefined;
  }
}
