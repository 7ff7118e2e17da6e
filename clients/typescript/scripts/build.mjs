// Builds the ESM and CommonJS trees and the tests. The CJS tree gets its own package.json so Node
// reads its .js files as CommonJS although this package is "type": "module".
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const build = (project) => {
  try {
    execFileSync(process.execPath, [tsc, '-p', join(root, project)], { stdio: 'inherit' });
  } catch {
    console.error(`build: ${project} failed`);
    process.exit(1);
  }
};

rmSync(join(root, 'dist'), { recursive: true, force: true });
build('tsconfig.json');
build('tsconfig.cjs.json');
mkdirSync(join(root, 'dist/cjs'), { recursive: true });
writeFileSync(join(root, 'dist/cjs/package.json'), '{ "type": "commonjs" }\n');
if (!process.argv.includes('--no-tests')) build('tsconfig.test.json');
