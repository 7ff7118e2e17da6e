/**
 * The Dockerfile parser and the shell-word expander against BuildKit's own test data
 * (shared/reference/dockerfile-conformance, read at test time): every parser case dumps to its
 * `result`, every negative case is refused, every envVarTest and wordsTest line agrees.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { dumpNode, parseDockerfile } from '../../src/engine/build/dockerfile/parser.js';
import { processWord, processWords } from '../../src/engine/build/dockerfile/shell-word.js';
import { DockerIgnore, readIgnorePatterns } from '../../src/engine/build/dockerfile/dockerignore.js';

/** The repo's root is three levels above dist/test/build; shared/ sits beside the clone (CI) or
 *  beside the worktrees' parent (developer worktrees). */
function conformanceDir(): string {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
  for (const c of [join(root, '../shared'), join(root, '../../shared')]) {
    const d = join(c, 'reference/dockerfile-conformance');
    if (existsSync(d)) return d;
  }
  throw new Error(`shared/reference/dockerfile-conformance not found beside ${root}`);
}

const DIR = conformanceDir();

describe('dockerfile conformance: parser', () => {
  const cases = readdirSync(join(DIR, 'parser-testfiles'));
  it('has the data', () => assert.ok(cases.length >= 30, `${cases.length} cases`));
  for (const c of cases) {
    it(c, () => {
      const text = readFileSync(join(DIR, 'parser-testfiles', c, 'Dockerfile'), 'utf8');
      const want = readFileSync(join(DIR, 'parser-testfiles', c, 'result'), 'utf8').split('\n').filter((l) => l !== '');
      const got = parseDockerfile(text).nodes.map((n) => '(' + dumpNode(n) + ')');
      assert.deepEqual(got, want);
    });
  }
  for (const c of readdirSync(join(DIR, 'parser-testfiles-negative'))) {
    it(`refuses ${c}`, () => {
      const text = readFileSync(join(DIR, 'parser-testfiles-negative', c, 'Dockerfile'), 'utf8');
      assert.throws(() => parseDockerfile(text));
    });
  }
});

describe('dockerfile conformance: shell words', () => {
  it('envVarTest', () => {
    const env = new Map([['PWD', '/home'], ['SHELL', 'bash'], ['KOREAN', '한국어'], ['NULL', '']]);
    let n = 0;
    const failures: string[] = [];
    for (const raw of readFileSync(join(DIR, 'envVarTest'), 'utf8').split('\n')) {
      const line = raw.trim();
      if (line === '' || line.startsWith('#')) continue;
      const parts = line.split('|');
      assert.equal(parts.length, 3, line);
      const [platform, source, expected] = parts.map((p) => p.trim());
      if (platform === 'W') continue;
      n++;
      let got: string;
      try { got = processWord(source, env); } catch { got = 'error'; }
      if (got !== expected) failures.push(`${source}: got ${JSON.stringify(got)}, want ${JSON.stringify(expected)}`);
    }
    assert.ok(n > 200, `${n} cases`);
    assert.deepEqual(failures, []);
  });

  it('wordsTest', () => {
    const env = new Map<string, string>();
    let n = 0;
    const failures: string[] = [];
    for (const line of readFileSync(join(DIR, 'wordsTest'), 'utf8').split('\n')) {
      if (line.trim() === '' || line.startsWith('#')) continue;
      if (line.startsWith('ENV ')) {
        const kv = line.slice(3).replace(/^ +/, '');
        const eq = kv.indexOf('=');
        env.set(kv.slice(0, eq), kv.slice(eq + 1));
        continue;
      }
      const parts = line.split('|');
      assert.equal(parts.length, 2, line);
      const expected = parts[1].replace(/^ +/, '').split(',');
      n++;
      let got: string[];
      try { got = processWords(parts[0].trim(), env); } catch { got = ['error']; }
      if (JSON.stringify(got) !== JSON.stringify(expected)) failures.push(`${parts[0]}: got ${JSON.stringify(got)}, want ${JSON.stringify(expected)}`);
    }
    assert.ok(n > 20, `${n} cases`);
    assert.deepEqual(failures, []);
  });
});

describe('dockerfile: heredocs, flags, directives', () => {
  it('reads heredoc bodies after RUN and COPY', () => {
    const p = parseDockerfile('FROM scratch\nRUN <<EOF\necho hi\necho there\nEOF\nCOPY <<-"A" /x\n\tbody $X\n\tA\nCMD ["sh"]\n');
    assert.deepEqual(p.nodes.map((n) => n.name), ['from', 'run', 'copy', 'cmd']);
    assert.equal(p.nodes[1].heredocs[0].content, 'echo hi\necho there\n');
    assert.deepEqual(p.nodes[2].heredocs[0], { name: 'A', chomp: true, expand: false, content: 'body $X\n' });
  });
  it('keeps instruction flags apart from the arguments', () => {
    const p = parseDockerfile('FROM --platform=linux/amd64 busybox AS b\nCOPY --from=b --chown=1:2 --chmod=0644 /a /b\n');
    assert.deepEqual(p.nodes[0].flags, ['--platform=linux/amd64']);
    assert.deepEqual(p.nodes[0].args, ['busybox', 'AS', 'b']);
    assert.deepEqual(p.nodes[1].flags, ['--from=b', '--chown=1:2', '--chmod=0644']);
  });
  it('notes the syntax directive and refuses a second escape directive or a bad token', () => {
    assert.equal(parseDockerfile('# syntax=docker/dockerfile:1\nFROM scratch\n').warnings.length, 1);
    assert.throws(() => parseDockerfile('# escape=`\n# escape=\\\nFROM scratch\n'));
    assert.throws(() => parseDockerfile('# escape=x\nFROM scratch\n'));
  });
});

describe('dockerignore', () => {
  it('matches ** and ! exceptions as dockerd does', () => {
    const ig = new DockerIgnore(readIgnorePatterns('# comment\n**/*.log\n/build/\n!build/keep\nsecret*\n'));
    assert.equal(ig.ignores('a.log'), true);
    assert.equal(ig.ignores('x/y/z.log'), true);
    assert.equal(ig.ignores('build/out'), true);
    assert.equal(ig.ignores('build/keep'), false);
    assert.equal(ig.ignores('secret.txt'), true);
    assert.equal(ig.ignores('src/secret.txt'), false);
    assert.equal(ig.ignores('main.c'), false);
  });
});
