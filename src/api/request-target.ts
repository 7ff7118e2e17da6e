/**
 * The request target, split into path and query without the WHATWG URL parser when it would change
 * nothing: origin-form paths of plain characters without dot segments, and no fragment. Anything
 * else goes through `new URL`, which normalizes it as before.
 */
export interface RequestTarget {
  /** Percent-encoded as received. */
  path: string;
  /** The query without its '?'. */
  search: string;
}

/** Characters the URL parser leaves alone in a path (no dot segments checked here). */
const PLAIN_PATH = /^\/(?!\/)[\w\-.~!$&'()*+,;=:@%/]*$/;

export function parseRequestTarget(url: string): RequestTarget {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (PLAIN_PATH.test(path) && !path.includes('/.') && !/%2e/i.test(path) && (q < 0 || !url.includes('#', q))) {
    return { path, search: q < 0 ? '' : url.slice(q + 1) };
  }
  const parsed = new URL(url, 'http://berth');
  return { path: parsed.pathname, search: parsed.search.slice(1) };
}
