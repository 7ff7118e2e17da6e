// Dockerfile parser: text → instruction nodes, the same tree BuildKit's frontend builds (its test data
// in shared/reference/dockerfile-conformance is the reference). Expansion of variables happens later,
// per instruction, in the builder (shell-word.ts).

/** One parsed instruction. `args` are the values of BuildKit's `Next` chain; `sub` holds ONBUILD's child. */
export interface DockerfileNode {
  /** lower-case instruction name (`from`, `run`, ...) */
  name: string;
  /** `--flag=value` words before the arguments, as written */
  flags: string[];
  args: string[];
  /** the argument was a JSON array (exec form) */
  json: boolean;
  /** the instruction line after continuations were joined */
  original: string;
  /** 1-based line the instruction starts on */
  line: number;
  heredocs: Heredoc[];
  sub?: DockerfileNode;
}

export interface Heredoc {
  name: string;
  content: string;
  /** the word was quoted: no expansion of the body */
  expand: boolean;
  chomp: boolean;
}

export interface ParsedDockerfile {
  nodes: DockerfileNode[];
  escape: string;
  /** `# syntax=` value (ignored by the classic builder, reported as a warning) */
  syntax?: string;
  warnings: string[];
}

export class DockerfileParseError extends Error {}

const WS = /[\t\v\f\r ]+/;
const isSpace = (ch: string): boolean => /\s/u.test(ch);
const DIRECTIVE = /^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*$/;
const KNOWN_DIRECTIVES = new Set(['escape', 'syntax', 'check']);
const HEREDOC_INSTRUCTIONS = new Set(['run', 'copy', 'add']);

const trimLeft = (s: string): string => s.replace(/^\s+/u, '');
const isComment = (line: string): boolean => trimLeft(line).startsWith('#');

export function parseDockerfile(text: string): ParsedDockerfile {
  const lines = text.replace(/^\uFEFF/, '').split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === '' && text.endsWith('\n')) lines.pop();
  const warnings: string[] = [];
  const directives = new Map<string, string>();
  let directivesDone = false;
  let escape = '\\';
  // an escape token at the end continues the line, unless it is itself escaped
  let continuation = /(^|[^\\])\\[ \t]*$/;

  const nodes: DockerfileNode[] = [];
  let i = 0;
  while (i < lines.length) {
    const raw = lines[i];
    const startLine = i + 1;
    i++;
    if (!directivesDone) {
      const m = DIRECTIVE.exec(raw);
      const key = m?.[1].toLowerCase();
      if (!m || !KNOWN_DIRECTIVES.has(key!)) {
        directivesDone = true;
      } else {
        if (directives.has(key!)) throw new DockerfileParseError(`only one ${key} parser directive can be used`);
        directives.set(key!, m[2]);
        if (key === 'escape') {
          if (m[2] !== '\\' && m[2] !== '`') throw new DockerfileParseError(`invalid escape token '${m[2]}' does not match ` + '` or \\');
          escape = m[2];
          continuation = new RegExp('(^|[^\\' + escape + '])\\' + escape + '[ \\t]*$');
        }
        continue;
      }
    }
    let first = trimLeft(raw);
    if (first.startsWith('#')) first = '';
    if (first === '') continue;
    let [line, done] = trimContinuation(first, continuation);
    while (!done && i < lines.length) {
      const next = lines[i];
      i++;
      if (isComment(next)) continue;
      if (trimLeft(next) === '') continue; // empty continuation line: allowed, BuildKit warns
      const [part, end] = trimContinuation(next, continuation);
      line += part;
      done = end;
    }
    const node = nodeFromLine(line, escape, startLine);
    // Heredoc bodies follow the instruction line.
    if (HEREDOC_INSTRUCTIONS.has(node.name)) {
      for (const doc of heredocWords(line)) {
        const body: string[] = [];
        let closed = false;
        while (i < lines.length) {
          const l = lines[i];
          i++;
          const cmp = doc.chomp ? l.replace(/^\t+/, '') : l;
          if (cmp === doc.name) { closed = true; break; }
          body.push(cmp);
        }
        if (!closed) throw new DockerfileParseError(`unterminated heredoc ${doc.name}`);
        node.heredocs.push({ ...doc, content: body.map((b) => b + '\n').join('') });
      }
    }
    nodes.push(node);
  }
  if (nodes.length === 0) throw new DockerfileParseError('the Dockerfile (Dockerfile) cannot be empty');
  const syntax = directives.get('syntax');
  if (syntax) warnings.push(`the syntax directive (${syntax}) is ignored by the classic builder`);
  return { nodes, escape, syntax, warnings };
}

function trimContinuation(line: string, re: RegExp): [string, boolean] {
  if (re.test(line)) return [line.replace(re, '$1'), false];
  return [line, true];
}

/** `<<EOF`, `<<-EOF`, `<<"EOF"` words of a RUN/COPY/ADD line. */
function heredocWords(line: string): Omit<Heredoc, 'content'>[] {
  const out: Omit<Heredoc, 'content'>[] = [];
  const re = /<<(-?)(["']?)([A-Za-z_][A-Za-z0-9_]*)\2/g;
  for (let m = re.exec(line); m; m = re.exec(line)) out.push({ name: m[3], chomp: m[1] === '-', expand: m[2] === '' });
  return out;
}

function nodeFromLine(line: string, escape: string, lineNo: number): DockerfileNode {
  const trimmed = line.trim();
  const ws = WS.exec(trimmed);
  const cmd = ws ? trimmed.slice(0, ws.index) : trimmed;
  let flags: string[] = [];
  let rest = '';
  if (ws) {
    [rest, flags] = extractFlags(trimmed.slice(ws.index + ws[0].length));
    rest = rest.trim();
  }
  const name = cmd.toLowerCase();
  const node: DockerfileNode = { name, flags, args: [], json: false, original: line, line: lineNo, heredocs: [] };
  switch (name) {
    case 'add': case 'copy': case 'volume':
      Object.assign(node, maybeJsonToList(rest)); break;
    case 'cmd': case 'entrypoint': case 'run': case 'shell':
      Object.assign(node, maybeJson(rest)); break;
    case 'arg': node.args = parseWords(rest, escape); break;
    case 'env': node.args = parseNameVal(rest, 'ENV', escape); break;
    case 'label': node.args = parseNameVal(rest, 'LABEL', escape); break;
    case 'expose': case 'from': node.args = splitWs(rest); break;
    case 'healthcheck': Object.assign(node, parseHealth(rest)); break;
    case 'maintainer': case 'stopsignal': case 'user': case 'workdir':
      node.args = rest === '' ? [] : [rest]; break;
    case 'onbuild':
      if (rest !== '') node.sub = nodeFromLine(rest, escape, lineNo);
      break;
    default: break; // unknown instructions are reported by the builder
  }
  return node;
}

const splitWs = (s: string): string[] => (s === '' ? [] : s.split(WS));

/** Leading `--name=value` words; `--` ends them. Returns the rest of the line and the flags. */
function extractFlags(line: string): [string, string[]] {
  const words: string[] = [];
  let inWord = false;
  let quote = '';
  let word = '';
  let blankOK = false;
  for (let pos = 0; pos <= line.length; pos++) {
    const ch = line[pos];
    if (!inWord && !quote) {
      if (pos === line.length) break;
      if (isSpace(ch)) continue;
      if (ch !== '-' || line[pos + 1] !== '-') return [line.slice(pos), words];
      inWord = true;
    }
    if (pos === line.length) {
      if (word !== '--' && (blankOK || word.length > 0)) words.push(word);
      break;
    }
    if (quote) {
      if (ch === quote) { quote = ''; continue; }
      if (ch === '\\') {
        if (pos + 1 === line.length) { quote = ''; continue; }
        pos++;
        word += line[pos];
        continue;
      }
      word += ch;
      continue;
    }
    if (isSpace(ch)) {
      inWord = false;
      if (word === '--') return [line.slice(pos), words];
      if (blankOK || word.length > 0) words.push(word);
      word = '';
      blankOK = false;
      continue;
    }
    if (ch === "'" || ch === '"') { quote = ch; blankOK = true; continue; }
    if (ch === '\\') {
      if (pos + 1 === line.length) continue;
      pos++;
      word += line[pos];
      continue;
    }
    word += ch;
  }
  return ['', words];
}

class NotStringArray extends Error {}

function parseJson(rest: string): string[] | undefined {
  rest = trimLeft(rest);
  if (!rest.startsWith('[')) return undefined;
  let value: unknown;
  try { value = JSON.parse(rest); } catch { return undefined; }
  if (!Array.isArray(value)) return undefined;
  if (!value.every((v) => typeof v === 'string')) throw new NotStringArray();
  return value as string[];
}

function jsonOr(rest: string, fallback: () => string[]): { args: string[]; json: boolean } {
  try {
    const arr = parseJson(rest);
    if (arr) return { args: arr, json: true };
  } catch (e) {
    if (e instanceof NotStringArray) throw new DockerfileParseError('dockerfile: when using JSON array syntax, arrays must be comprised of strings only');
    throw e;
  }
  return { args: fallback(), json: false };
}

const maybeJson = (rest: string) => (rest === '' ? { args: [], json: false } : jsonOr(rest, () => [rest]));
const maybeJsonToList = (rest: string) => jsonOr(rest, () => splitWs(rest));

function parseHealth(rest: string): { args: string[]; json: boolean } {
  const m = /^(\S*)\s*/u.exec(rest)!;
  if (m[1] === '') return { args: [], json: false };
  const cmd = maybeJson(rest.slice(m[0].length));
  return { args: [m[1], ...cmd.args], json: cmd.json };
}

/** ENV/LABEL: `key value` (old form) or `k=v k2=v2`; returns key, value, separator triples. */
function parseNameVal(rest: string, key: string, escape: string): string[] {
  const words = parseWords(rest, escape);
  if (words.length === 0) throw new DockerfileParseError(`${key} requires at least one argument`);
  if (!words[0].includes('=')) {
    const parts = rest.split(WS);
    if (parts.length < 2) throw new DockerfileParseError(`${key} must have two arguments`);
    const ws = WS.exec(rest)!;
    return [rest.slice(0, ws.index), rest.slice(ws.index + ws[0].length), ''];
  }
  const out: string[] = [];
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq < 0) throw new DockerfileParseError(`Syntax error - can't find = in "${w}". Must be of the form: name=value`);
    out.push(w.slice(0, eq), w.slice(eq + 1), '=');
  }
  return out;
}

/** Splits on unquoted whitespace, keeping quotes and escapes in the words (they are removed at expansion). */
export function parseWords(rest: string, escape: string): string[] {
  const words: string[] = [];
  const chars = Array.from(rest);
  let inWord = false;
  let quote = '';
  let word = '';
  let blankOK = false;
  for (let pos = 0; pos <= chars.length; pos++) {
    const ch = chars[pos];
    if (!inWord && !quote) {
      if (pos === chars.length) break;
      if (isSpace(ch)) continue;
      inWord = true;
    }
    if (pos === chars.length) {
      if (blankOK || word.length > 0) words.push(word);
      break;
    }
    if (quote) {
      if (ch === quote) quote = '';
      if (ch === escape && quote !== "'" && ch !== quote) {
        // (an escape inside double quotes takes the next character with it)
        if (pos + 1 === chars.length) { quote = ''; continue; }
        pos++;
        word += ch;
        word += chars[pos];
        continue;
      }
      word += ch;
      continue;
    }
    if (isSpace(ch)) {
      inWord = false;
      if (blankOK || word.length > 0) words.push(word);
      word = '';
      blankOK = false;
      continue;
    }
    if (ch === "'" || ch === '"') { quote = ch; blankOK = true; }
    if (ch === escape) {
      if (pos + 1 === chars.length) continue;
      word += ch;
      pos++;
      word += chars[pos];
      continue;
    }
    word += ch;
  }
  return words;
}

/** BuildKit's dump of a node: `(name ["flags"] "arg" ...)` with Go-quoted strings. */
export function dumpNode(node: DockerfileNode): string {
  let s = node.name;
  if (node.flags.length > 0) s += ' [' + node.flags.map(goQuote).join(' ') + ']';
  if (node.sub) s += ' (' + dumpNode(node.sub) + ')';
  for (const a of node.args) s += ' ' + goQuote(a);
  return s.trim();
}

function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\v') out += '\\v';
    else if (ch === '\x07') out += '\\a';
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return out + '"';
}
