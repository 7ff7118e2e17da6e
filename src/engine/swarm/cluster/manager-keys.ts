/**
 * What only managers hold: the cluster CA's key, so that any manager (a promoted one too) can sign a
 * joining node's certificate. The first manager to link puts it in etcd (`keys/ca`), sealed under the
 * cluster's data key; a manager without it opens that copy when it first needs to sign, and keeps it
 * beside its certificates. A demoted node drops it.
 */
import type { EtcdState } from './etcd-state.js';
import type { Membership } from './membership.js';
import { seal, unseal, type Sealed } from './data-key.js';
import { unavailable } from '../../../lib/errors.js';

/** The etcd document kind (`keys/<id>`) these keys live under. */
export const KEYS_KIND = 'keys';

export class ManagerKeys {
  /** `keys/ca` as etcd holds it (heard through the store's watch). */
  #sealedCaKey: Sealed | undefined;

  constructor(private readonly members: Membership) {}

  /** A `keys/<id>` document from etcd (undefined: deleted). */
  heard(id: string, doc: unknown | undefined): void {
    if (id === 'ca') this.#sealedCaKey = doc as Sealed | undefined;
  }

  /** At link time, a manager holding the CA key puts it in etcd when etcd lacks it. */
  share(state: EtcdState, entries: Map<string, unknown>): void {
    const f = this.members.files;
    if (!f?.caKey || !f.dataKey || entries.has(`${KEYS_KIND}/ca`)) return;
    state.put(`${KEYS_KIND}/ca`, seal(f.dataKey, { key: f.caKey }));
  }

  /** This manager's CA key: its own, or the one in etcd, kept from then on. */
  async ensureCaKey(): Promise<void> {
    const f = this.members.files;
    if (!f) throw unavailable('this node has no cluster certificates');
    if (f.caKey) return;
    if (!f.dataKey || !this.#sealedCaKey) throw unavailable('this node cannot sign certificates yet: the cluster CA key is not known to it');
    await this.members.keepCaKey(unseal<{ key: string }>(f.dataKey, this.#sealedCaKey).key);
  }

  /** Demoted: the CA key goes. */
  drop(): Promise<void> {
    return this.members.dropCaKey();
  }
}
