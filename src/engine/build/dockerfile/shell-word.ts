// Shell-word expansion as Dockerfile instructions apply it (ENV, COPY, WORKDIR, ...): quotes removed,
// escapes applied, `$V`, `${V}`, `${V:-w}`, `${V:+w}`, `${V?w}`, `${V#p}`, `${V%p}`, `${V/p/r}`.
// Behaviour is pinned by BuildKit's envVarTest and wordsTest data (shared/reference).

export class ShellWordError extends Error {}

type Env = ReadonlyMap<string, string>;
const EOF = '';
const isSpace = (ch: string): boolean => /\s/u.test(ch);
const isDigit = (ch: string): boolean => /\p{Nd}/u.test(ch);
const isLetter = (ch: string): boolean => /\p{L}/u.test(ch);
const SPECIAL = new Set(['@', '*', '#', '?', '-', '$', '!', '0']);

class Words {
  word = '';
  words: string[] = [];
  inWord = false;
  addChar(ch: string): void {
    if (isSpace(ch)) {
      if (this.inWord && this.word.length > 0) { this.words.push(this.word); this.word = ''; this.inWord = false; }
    } else this.addRaw(ch);
  }
  addRaw(s: string): void { this.word += s; this.inWord = true; }
  addString(s: string): void { for (const ch of s) this.addChar(ch); }
  done(): string[] {
    if (this.word.length > 0) { this.words.push(this.word); this.word = ''; this.inWord = false; }
    return this.words;
  }
}

class Scanner {
  private pos = 0;
  private readonly chars: string[];
  constructor(s: string) { this.chars = Array.from(s); }
  peek(): string { return this.pos < this.chars.length ? this.chars[this.pos] : EOF; }
  next(): string { return this.pos < this.chars.length ? this.chars[this.pos++] : EOF; }
}

class ShellWord {
  private readonly sc: Scanner;
  constructor(source: string, private readonly env: Env, private readonly escape: string) { this.sc = new Scanner(source); }

  run(stop: string, rawEscapes: boolean): [string, string[]] {
    let result = '';
    const words = new Words();
    for (let ch = this.sc.peek(); ch !== EOF; ch = this.sc.peek()) {
      if (stop !== EOF && ch === stop) { this.sc.next(); return [result, words.done()]; }
      if (ch === '$' || ch === "'" || ch === '"') {
        const tmp = ch === '$' ? this.dollar() : ch === "'" ? this.single() : this.double();
        result += tmp;
        if (ch === '$') words.addString(tmp); else words.addRaw(tmp);
        continue;
      }
      let c = this.sc.next();
      if (c === this.escape) {
        if (rawEscapes) { words.addRaw(c); result += c; }
        c = this.sc.next();
        if (c === EOF) break;
        words.addRaw(c);
      } else words.addChar(c);
      result += c;
    }
    if (stop !== EOF) throw new ShellWordError(`unexpected end of statement while looking for matching ${stop}`);
    return [result, words.done()];
  }

  private single(): string {
    this.sc.next();
    let out = '';
    for (;;) {
      const ch = this.sc.next();
      if (ch === EOF) throw new ShellWordError('unexpected end of statement while looking for matching single-quote');
      if (ch === "'") return out;
      out += ch;
    }
  }

  private double(): string {
    this.sc.next();
    let out = '';
    for (;;) {
      const p = this.sc.peek();
      if (p === EOF) throw new ShellWordError('unexpected end of statement while looking for matching double-quote');
      if (p === '"') { this.sc.next(); return out; }
      if (p === '$') { out += this.dollar(); continue; }
      let ch = this.sc.next();
      if (ch === this.escape) {
        const n = this.sc.peek();
        if (n === EOF) continue;
        if (n === '"' || n === '$' || n === this.escape) ch = this.sc.next();
      }
      out += ch;
    }
  }

  private name(): string {
    let name = '';
    for (let ch = this.sc.peek(); ch !== EOF; ch = this.sc.peek()) {
      if (name === '' && isDigit(ch)) {
        while (this.sc.peek() !== EOF && isDigit(this.sc.peek())) name += this.sc.next();
        return name;
      }
      if (name === '' && SPECIAL.has(ch)) return this.sc.next();
      if (!isLetter(ch) && !isDigit(ch) && ch !== '_') break;
      name += this.sc.next();
    }
    return name;
  }

  private dollar(): string {
    this.sc.next();
    if (this.sc.peek() !== '{') {
      const name = this.name();
      return name === '' ? '$' : (this.env.get(name) ?? '');
    }
    this.sc.next();
    const p = this.sc.peek();
    if (p === EOF) throw new ShellWordError("syntax error: missing '}'");
    if (p === '{' || p === '}' || p === ':') throw new ShellWordError('syntax error: bad substitution');
    const name = this.name();
    let ch = this.sc.next();
    let mod = ch;
    const value = this.env.get(name);
    const set = value !== undefined;
    if (ch === '}') return value ?? '';
    if (ch === '/') {
      const all = this.sc.peek() === '/';
      if (all) this.sc.next();
      const pattern = this.until('/', true, "syntax error: missing '/' in ${}");
      const repl = this.until('}', true, "syntax error: missing '}'");
      const re = globToRegExp(pattern, false);
      return (value ?? '').replace(new RegExp(re.source, all ? 'gu' : 'u'), () => repl);
    }
    let nullIsUnset = false;
    if (ch === ':') { nullIsUnset = true; ch = this.sc.next(); mod += ch; }
    else if (!['+', '-', '?', '#', '%'].includes(ch)) throw new ShellWordError(`unsupported modifier (${mod}) in substitution`);
    const raw = ch === '#' || ch === '%';
    if (nullIsUnset && raw) throw new ShellWordError(`unsupported modifier (${mod}) in substitution`);
    const word = this.until('}', raw, "syntax error: missing '}'");
    const empty = !set || (nullIsUnset && value === '');
    switch (ch) {
      case '-': return empty ? word : value!;
      case '+': return empty ? '' : word;
      case '?':
        if (!set) throw new ShellWordError(`${name}: ${word || 'is not allowed to be unset'}`);
        if (nullIsUnset && value === '') throw new ShellWordError(`${name}: ${word || 'is not allowed to be empty'}`);
        return value!;
      case '#': case '%': {
        let pat = word;
        const greedy = pat.startsWith(ch);
        if (greedy) pat = pat.slice(1);
        const v = value ?? '';
        const g = globToRegExp(pat, greedy).source;
        const m = new RegExp(ch === '#' ? `^(?:${g})` : `(?:${g})$`, 'u').exec(v);
        if (!m) return v;
        if (ch === '#') return v.slice(m[0].length);
        // shortest suffix: try from the end
        if (!greedy) for (let i = v.length; i >= 0; i--) if (new RegExp(`^(?:${g})$`, 'u').test(v.slice(i))) return v.slice(0, i);
        return v.slice(0, m.index);
      }
      default: throw new ShellWordError(`unsupported modifier (${mod}) in substitution`);
    }
  }

  private until(stop: string, raw: boolean, eofMessage: string): string {
    try {
      return this.run(stop, raw)[0];
    } catch (e) {
      if (this.sc.peek() === EOF) throw new ShellWordError(eofMessage);
      throw e;
    }
  }
}

function globToRegExp(glob: string, greedy: boolean): RegExp {
  let re = '';
  const star = greedy ? '.*' : '.*?';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === '\\' && i + 1 < glob.length) { re += escapeRe(glob[++i]); continue; }
    if (c === '*') re += star;
    else if (c === '?') re += '.';
    else re += escapeRe(c);
  }
  return new RegExp(re, 'u');
}
const escapeRe = (c: string): string => c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** Expands one word (quotes removed, variables substituted), as for ENV values, paths, USER. */
export function processWord(word: string, env: Env, escape = '\\'): string {
  try {
    return new ShellWord(word, env, escape).run(EOF, false)[0];
  } catch (e) {
    if (e instanceof ShellWordError) throw new ShellWordError(`failed to process "${word}": ${e.message}`);
    throw e;
  }
}

/** Expands and splits into words on unquoted whitespace, as for the shell form of lists. */
export function processWords(word: string, env: Env, escape = '\\'): string[] {
  try {
    return new ShellWord(word, env, escape).run(EOF, false)[1];
  } catch (e) {
    if (e instanceof ShellWordError) throw new ShellWordError(`failed to process "${word}": ${e.message}`);
    throw e;
  }
}

/** `K=V` strings → map (later entries win). */
export function envMap(list: readonly string[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const kv of list) {
    const eq = kv.indexOf('=');
    if (eq < 0) m.set(kv, ''); else m.set(kv.slice(0, eq), kv.slice(eq + 1));
  }
  return m;
}
