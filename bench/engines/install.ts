import { existsSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { mustRun } from '../lib/run-command.js';
import { DOCKERD_BINARY } from './dockerd.js';
import { PODMAN_BINARY } from './podman.js';

/**
 * `--install`: Debian's docker.io and podman through apt. While apt runs, a policy-rc.d refusing
 * service starts is in place (unless one already is), so the packages' init scripts do not start a
 * system dockerd on /var/run/docker.sock: the suite starts its own instances on temp sockets.
 */

const POLICY = '/usr/sbin/policy-rc.d';

export async function installEngines(which: Array<'dockerd' | 'podman'>, log: (s: string) => void): Promise<void> {
  const packages = which.filter((w) => !existsSync(w === 'dockerd' ? DOCKERD_BINARY : PODMAN_BINARY)).map((w) => (w === 'dockerd' ? 'docker.io' : 'podman'));
  if (!packages.length) return;
  log(`installing ${packages.join(', ')} with apt-get`);
  const addedPolicy = !existsSync(POLICY);
  if (addedPolicy) writeFileSync(POLICY, '#!/bin/sh\n# written by berth bench/ while it installs engines\nexit 101\n', { mode: 0o755 });
  try {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    await mustRun('apt-get', ['update', '-q'], { env, timeoutMs: 300_000 });
    await mustRun('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], { env, timeoutMs: 900_000 });
  } finally {
    if (addedPolicy) await rm(POLICY, { force: true });
  }
}
