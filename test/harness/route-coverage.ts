/**
 * Route coverage: fails the suite when a route of berthd's has no test that calls it.
 *
 * berthd writes `route METHOD /template` for each route it registers and `answered METHOD /template`
 * the first time one answers (any status) to the file named by BERTHD_ROUTE_LOG (src/api/route-log.ts).
 * When BERTH_ROUTE_COVERAGE_DIR is set, every daemon the harness starts gets its own file there;
 * scripts/test.sh sets it for the full run and afterwards runs
 *
 *   node dist/test/harness/route-coverage.js DIR
 *
 * which lists the routes no daemon answered and exits 1 when there are any.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The environment that makes a daemon log its routes into the coverage dir (empty when coverage is off). */
export function routeLogEnv(daemonName: string): Record<string, string> {
  const dir = process.env.BERTH_ROUTE_COVERAGE_DIR;
  return dir ? { BERTHD_ROUTE_LOG: join(dir, `${daemonName}.routes`) } : {};
}

export interface RouteCoverage {
  /** Every route some daemon registered, "METHOD /template". */
  routes: Set<string>;
  answered: Set<string>;
  /** Registered and never answered, sorted by path then method. */
  missing: string[];
}

export function readRouteCoverage(dir: string): RouteCoverage {
  const routes = new Set<string>();
  const answered = new Set<string>();
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.routes')) continue;
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      const space = line.indexOf(' ');
      const kind = line.slice(0, space);
      if (kind === 'route') routes.add(line.slice(space + 1));
      else if (kind === 'answered') answered.add(line.slice(space + 1));
    }
  }
  const byPath = (a: string, b: string) => a.slice(a.indexOf(' ')).localeCompare(b.slice(b.indexOf(' '))) || a.localeCompare(b);
  return { routes, answered, missing: [...routes].filter((r) => !answered.has(r)).sort(byPath) };
}

/** The report and exit code of the check. No routes at all is a failure too: then nothing was measured. */
export function checkRouteCoverage(dir: string): { code: number; report: string } {
  const { routes, answered, missing } = readRouteCoverage(dir);
  if (routes.size === 0) return { code: 1, report: `route coverage: no daemon logged its routes in ${dir}\n` };
  const head = `route coverage: ${routes.size - missing.length} of ${routes.size} routes answered a test`;
  if (missing.length === 0) return { code: 0, report: `${head}\n` };
  const unknown = [...answered].filter((r) => !routes.has(r));
  return {
    code: 1,
    report: `${head}; no test calls these (add one to test/api/<routes file>.test.ts):\n${missing.map((r) => `  ${r}\n`).join('')}` +
      (unknown.length ? `answered but not registered (a stale daemon?): ${unknown.join(', ')}\n` : ''),
  };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const dir = process.argv[2];
  if (!dir) {
    process.stderr.write('usage: route-coverage.js DIR\n');
    process.exitCode = 2;
  } else {
    const { code, report } = checkRouteCoverage(dir);
    (code === 0 ? process.stdout : process.stderr).write(report);
    process.exitCode = code;
  }
}
