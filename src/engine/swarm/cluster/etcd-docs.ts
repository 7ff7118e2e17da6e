/**
 * How a document is kept under the swarm's etcd prefix: `{"w": writer node, "d": document}`, so a
 * node knows its own writes when they come back through its watch.
 */
import type { IKeyValue } from 'etcd3';

export interface StoredDoc {
  w: string;
  d: unknown;
}

export function encodeDoc(writer: string, doc: unknown): string {
  return JSON.stringify({ w: writer, d: doc });
}

/** The stored document (undefined: not one of ours, or not JSON). */
export function decodeDoc(kv: IKeyValue): StoredDoc | undefined {
  try {
    const v = JSON.parse(kv.value.toString()) as { w?: string; d?: unknown };
    return typeof v === 'object' && v !== null && 'd' in v ? { w: String(v.w ?? ''), d: v.d } : undefined;
  } catch {
    return undefined;
  }
}
