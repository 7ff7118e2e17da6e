/**
 * The house plan, pinned: which part of src/ may import which (docs/architecture.md draws it).
 * Imports only go down: api → engine → {images, registry, runtime, network, state} → lib. Routes
 * know HTTP and call the engine's facades; the engine never reaches back into api/.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// dist/src/layering.test.js → the repository's src/.
const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');

/** What routes may import from engine/: each aggregate's facade, and the records' vocabulary (models). */
const ROUTE_ENGINE_IMPORTS = [
  /^engine\/engine\.ts$/,
  /^engine\/system\.ts$/,
  /^engine\/disk-usage\.ts$/,
  /^engine\/containers\/(container-service|attach|exec|container-archive|log-reader)\.ts$/,
  /^engine\/images\/image-service\.ts$/,
  /^engine\/image-transfer\/image-transfer\.ts$/,
  /^engine\/volumes\/volume-service\.ts$/,
  /^engine\/build\/build-service\.ts$/,
  /^engine\/swarm\/swarm\.ts$/,
  /^engine\/networks\/networks\.ts$/,
  // Records and their pure helpers: the vocabulary routes translate to and from JSON.
  /^engine\/.*-model\.ts$/,
  /^engine\/containers\/attach-bridge\.ts$/,
  /^engine\/swarm\/(secrets|service-spec)\.ts$/,
];

/** Files allowed to break a rule for now, each with its reason (none today). */
const PENDING = new Set<string>([]);

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

/** src-relative paths of the project modules `file` imports (static, re-exports and import()). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const from = posix.dirname(relative(SRC, file).split('\\').join('/'));
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;'"]*?from\s*'(\.[^']+)'|import\(\s*'(\.[^']+)'\s*\)|(?:^|\n)\s*import\s*'(\.[^']+)'/g)) {
    const spec = (m[1] ?? m[2] ?? m[3])!;
    out.push(posix.normalize(posix.join(from, spec)).replace(/\.js$/, '.ts'));
  }
  return out;
}

const files = sourceFiles(SRC).map((f) => ({ path: relative(SRC, f).split('\\').join('/'), imports: importsOf(f) }));
/** The top folder under src/; data generated from the spec lives outside src/, in generated/ (a leaf). */
const layer = (p: string) => (p.startsWith('../generated/') ? '../generated' : p.split('/')[0]!);

function violations(pick: (path: string) => boolean, allowed: (target: string, path: string) => boolean): string[] {
  const bad: string[] = [];
  for (const f of files) {
    if (!pick(f.path) || PENDING.has(f.path)) continue;
    for (const t of f.imports) if (!allowed(t, f.path)) bad.push(`${f.path} → ${t}`);
  }
  return bad;
}

test('the import graph is read from the source tree', () => {
  // Guards the test itself: an import pattern that stopped matching would make every rule pass.
  const routes = files.filter((f) => f.path.startsWith('api/routes/'));
  assert.ok(routes.length >= 10, `found ${routes.length} routes files`);
  assert.ok(routes.every((f) => f.imports.some((t) => t === 'api/router.ts' || t.startsWith('api/'))), 'every routes file imports from api/');
  assert.ok(files.find((f) => f.path === 'main.ts')!.imports.includes('engine/engine.ts'));
});

test('routes import only api/, lib/ and the engine facades', () => {
  const bad = violations(
    (p) => p.startsWith('api/routes/'),
    (t) => t.startsWith('api/') || t.startsWith('lib/') || (t.startsWith('engine/') && ROUTE_ENGINE_IMPORTS.some((re) => re.test(t))),
  );
  assert.deepEqual(bad, []);
});

test('the engine never imports api/', () => {
  assert.deepEqual(violations((p) => layer(p) === 'engine', (t) => layer(t) !== 'api'), []);
});

test('stores and drivers import no layer above them; lib/ is a leaf', () => {
  const below: Record<string, string[]> = {
    runtime: ['runtime', 'lib'],
    // The pull pipeline (images/pull/) fetches through the registry client; the registry knows no store.
    images: ['images', 'registry', 'lib'],
    registry: ['registry', 'lib'],
    state: ['state', 'lib'],
    // Plumbing: the engine's network controller owns the records (engine/networks/).
    network: ['network', 'runtime', 'lib'],
    lib: ['lib', '../generated'],
  };
  assert.deepEqual(violations((p) => layer(p) in below, (t, p) => below[layer(p)]!.includes(layer(t))), []);
});
