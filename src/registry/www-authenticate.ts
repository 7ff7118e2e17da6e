/**
 * Parses `WWW-Authenticate` values. Node joins repeated headers with ", ", so one string may
 * hold several challenges: `Bearer realm="…",service="…", Basic realm="…"`.
 */

export interface Challenge {
  /** Lower-cased scheme: `bearer`, `basic`, … */
  scheme: string;
  /** Parameters with lower-cased names. */
  params: Record<string, string>;
}

export function parseChallenges(header: string | string[] | undefined): Challenge[] {
  if (header === undefined) return [];
  if (Array.isArray(header)) return header.flatMap((h) => parseChallenges(h));
  const text: string = header;
  const out: Challenge[] = [];
  let i = 0;
  const n = text.length;
  const skip = (chars: string) => {
    while (i < n && chars.includes(text[i]!)) i++;
  };
  const readToken = () => {
    const start = i;
    while (i < n && !' \t,="'.includes(text[i]!)) i++;
    return text.slice(start, i);
  };
  let current: Challenge | undefined;
  while (i < n) {
    skip(' \t,');
    if (i >= n) break;
    const token = readToken();
    skip(' \t');
    const token68 = text[i] === '=' && (i + 1 >= n || text[i + 1] === '=' || text[i + 1] === ',');
    if (token68) {
      // token68 form (`Negotiate abc==`): registries do not use it, skip it.
      while (i < n && text[i] !== ',') i++;
    } else if (text[i] === '=' && current && token !== '') {
      i++;
      skip(' \t');
      current.params[token.toLowerCase()] = text[i] === '"' ? readQuoted() : readToken();
    } else if (token !== '') {
      current = { scheme: token.toLowerCase(), params: {} };
      out.push(current);
    } else {
      i++; // a stray '=' or '"': move on
    }
  }
  return out;

  function readQuoted(): string {
    i++; // opening quote
    let value = '';
    while (i < n && text[i] !== '"') {
      if (text[i] === '\\' && i + 1 < n) i++;
      value += text[i];
      i++;
    }
    i++; // closing quote
    return value;
  }
}
