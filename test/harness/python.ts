/**
 * docker-py, the official Python client, from the venv scripts/install-deps.sh makes (.venv/).
 * Tests hand it a script and the daemon's socket; the script prints JSON for the test to check.
 */
import { fileURLToPath } from 'node:url';
import { resolve } from 'node:path';
import { existsSync } from 'node:fs';
import { run } from './child-process.js';

export const REPO_ROOT = resolve(fileURLToPath(import.meta.url), '../../../..');
export const PYTHON = resolve(REPO_ROOT, '.venv/bin/python');

export function haveDockerPy(): boolean {
  return existsSync(PYTHON);
}

/** Runs `script` with DOCKER_HOST pointing at the daemon; resolves with its exit code and output. */
export async function runDockerPy(socket: string, script: string, opts: { timeoutMs?: number; env?: Record<string, string> } = {}) {
  return run(PYTHON, ['-c', script], { env: { ...process.env, DOCKER_HOST: `unix://${socket}`, ...opts.env }, timeoutMs: opts.timeoutMs ?? 120_000 });
}
