// `.dockerignore` as dockerd reads it: one pattern a line, `#` comments, `!` exceptions, `**`, paths
// cleaned and made relative. The matching itself is @balena/dockerignore (a port of Docker's matcher).
import { posix } from 'node:path';
import dockerignore from '@balena/dockerignore';

export function readIgnorePatterns(text: string): string[] {
  const out: string[] = [];
  for (let line of text.split('\n')) {
    line = line.replace(/\r$/, '');
    if (line.startsWith('#')) continue;
    line = line.trim();
    if (line === '') continue;
    let neg = false;
    if (line.startsWith('!')) { neg = true; line = line.slice(1).trim(); }
    if (line === '') continue;
    let p = posix.normalize(line);
    if (p !== '/') p = p.replace(/^\/+/, '');
    if (p.endsWith('/') && p !== '/') p = p.slice(0, -1);
    out.push((neg ? '!' : '') + p);
  }
  return out;
}

/** Answers whether a context path (relative, `/`-separated) is excluded. The Dockerfile and the
 *  .dockerignore are always sent to the daemon; whether COPY sees them is up to the patterns. */
export class DockerIgnore {
  private readonly matcher;
  readonly empty: boolean;
  constructor(patterns: string[]) {
    this.matcher = (dockerignore as unknown as () => ReturnType<typeof dockerignore.default>)().add(patterns);
    this.empty = patterns.length === 0;
  }
  ignores(relPath: string): boolean {
    if (this.empty) return false;
    const p = posix.normalize(relPath).replace(/^\/+/, '');
    if (p === '' || p === '.') return false;
    return this.matcher.ignores(p);
  }
}
