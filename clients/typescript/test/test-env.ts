/**
 * What the client tests run against: a berthd and seeded registries started by the project's
 * test harness (`node dist/test/harness/cli.js up --out FILE`), whose description file is named
 * by BERTH_CLIENT_TEST_ENV. Temp dirs made here are removed after the test file.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { randomBytes } from 'node:crypto';

export interface TestRegistry {
  host: string;
  username?: string;
  password?: string;
}

export interface TestEnv {
  /** DOCKER_HOST form of berthd's socket. */
  dockerHost: string;
  registries: { open: TestRegistry; basic: TestRegistry; token: TestRegistry };
}

export function loadTestEnv(): TestEnv {
  const file = process.env.BERTH_CLIENT_TEST_ENV;
  if (!file) throw new Error('BERTH_CLIENT_TEST_ENV is not set: run the tests through scripts/test-clients.sh');
  return JSON.parse(readFileSync(file, 'utf8')) as TestEnv;
}

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

export function tempDir(prefix = 'berth-client-test-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** A name unique to this run, for containers and image tags the test creates. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}
