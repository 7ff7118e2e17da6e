import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { run } from './child-process.js';
import { repoRoot, startDaemon, type TestDaemon } from './daemon.js';
import { checkRouteCoverage, readRouteCoverage } from './route-coverage.js';
import { makeTempDir, removeDir, removeDirSync } from './temp-dir.js';

/** The route coverage check (route-coverage.ts) against a real berthd that logs its routes. */

describe('route coverage', () => {
  let dir: string;
  let d: TestDaemon;
  before(async () => {
    dir = makeTempDir('route-coverage');
    d = await startDaemon({ env: { BERTHD_ROUTE_LOG: join(dir, 'one.routes') } });
  });
  after(async () => {
    await d?.teardown();
    if (dir) await removeDir(dir);
  });

  it('berthd lists its routes and logs each template once, with or without a version, whatever the status', async () => {
    assert.equal((await d.request('GET', '/_ping')).status, 200);
    assert.equal((await d.request('GET', '/v1.43/containers/json')).status, 200);
    assert.equal((await d.request('GET', '/containers/json?all=1')).status, 200);
    assert.equal((await d.request('GET', '/containers/no-such-container/json')).status, 404);
    assert.equal((await d.request('GET', '/no/such/route')).status, 404);
    const lines = readFileSync(join(dir, 'one.routes'), 'utf8').split('\n');
    assert.deepEqual(lines.filter((l) => l.startsWith('answered ')).sort(), [
      'answered GET /_ping',
      'answered GET /containers/:id/json',
      'answered GET /containers/json',
    ]);
    const cov = readRouteCoverage(dir);
    assert.ok(cov.routes.has('POST /containers/prune') && cov.routes.has('GET /containers/:id/json'), [...cov.routes].join(', '));
    assert.ok(cov.routes.size > 90, `only ${cov.routes.size} routes logged`);
  });

  it('fails listing the routes nobody called, and passes once all answered', async () => {
    const cli = fileURLToPath(new URL('./route-coverage.js', import.meta.url));
    const failing = await run(process.execPath, [cli, dir]);
    assert.equal(failing.code, 1);
    assert.match(failing.stderr, /^ {2}POST \/containers\/prune$/m);
    assert.doesNotMatch(failing.stderr, /^ {2}GET \/_ping$/m);
    // A second daemon's file (another test process) that answered everything else completes the set.
    const rest = readRouteCoverage(dir).missing.map((r) => `answered ${r}\n`).join('');
    writeFileSync(join(dir, 'two.routes'), rest);
    const all = readRouteCoverage(dir).routes.size;
    assert.deepEqual(checkRouteCoverage(dir), { code: 0, report: `route coverage: ${all} of ${all} routes answered a test\n` });
  });

  it('an empty directory is a failure, not a pass', () => {
    const empty = makeTempDir('route-coverage-empty');
    try {
      assert.equal(checkRouteCoverage(empty).code, 1);
    } finally {
      removeDirSync(empty);
    }
  });

  it('every routes file has its mirror test file, test/api/<resource>.test.ts', () => {
    const routes = join(repoRoot(), 'src', 'api', 'routes');
    const files = readdirSync(routes).filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'));
    // Helper modules (swarm-json.ts, swarm-request.ts) register no route and need no test file.
    const routeFiles = files.filter((f) => /\.on\(\s*(\[|'(GET|HEAD|POST|PUT|DELETE)')/.test(readFileSync(join(routes, f), 'utf8')));
    assert.ok(routeFiles.length >= 18, routeFiles.join(', '));
    const tests = new Set(readdirSync(join(repoRoot(), 'test', 'api')));
    assert.deepEqual(routeFiles.filter((f) => !tests.has(f.replace(/\.ts$/, '.test.ts'))), []);
  });
});
