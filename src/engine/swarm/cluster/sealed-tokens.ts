/**
 * The join tokens never reach etcd plain: the cluster document there holds them sealed under the data
 * key (`sealedJoinTokens`), which only managers have, so a worker reading etcd learns nothing it could
 * join (or promote itself) with. A document from before holds them plain (`joinTokens`): still read,
 * and sealed by the next manager that writes it.
 */
import { seal, unseal, type Sealed } from './data-key.js';

export type JoinTokens = { worker: string; manager: string };

/** What a node that holds no data key knows of the tokens. */
export const NO_TOKENS: JoinTokens = { worker: '', manager: '' };

/** The cluster document as etcd gets it: tokens sealed (undefined without a data key: nothing to write). */
export function sealTokens(dataKey: Buffer | undefined, doc: { joinTokens?: JoinTokens }): object | undefined {
  if (!dataKey) return undefined;
  const { joinTokens, ...rest } = doc;
  return { ...rest, sealedJoinTokens: seal(dataKey, joinTokens ?? NO_TOKENS) };
}

/**
 * The tokens of a cluster document from etcd, and whether it held them plain (to be sealed now).
 * Without the data key, a node gets none.
 */
export function openTokens(dataKey: Buffer | undefined, doc: { joinTokens?: JoinTokens; sealedJoinTokens?: Sealed }): { tokens: JoinTokens; plain: boolean } {
  const plain = !!doc.joinTokens && !doc.sealedJoinTokens;
  if (!dataKey) return { tokens: { ...NO_TOKENS }, plain };
  if (doc.sealedJoinTokens) return { tokens: unseal<JoinTokens>(dataKey, doc.sealedJoinTokens), plain: false };
  return { tokens: doc.joinTokens ? { ...doc.joinTokens } : { ...NO_TOKENS }, plain };
}
