/**
 * What only managers hold: the data key secrets and configs are sealed with, and the cluster CA's key,
 * so that any manager (a promoted one too) can sign a joining node's certificate. The first manager
 * to link puts the CA key in etcd (`keys/ca`), sealed under the data key; a manager without it opens
 * that copy when it first needs to sign, and keeps it beside its certificates. A promoted worker gets
 * the data key from another manager (`GET /manager-keys` over mutual TLS, for nodes the cluster has
 * as managers only). A demoted node drops both.
 *
 * Auto-lock: the unlock key is in etcd too (`keys/unlock`, sealed under the data key, absent when
 * off); each manager keeps its key files sealed under it (cluster/key-files.ts), and seals them again
 * when it is rotated, or writes them plain when auto-lock goes off.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EtcdState } from './etcd-state.js';
import type { Membership } from './membership.js';
import { seal, unseal, type Sealed } from './data-key.js';
import { askAny, peerGetJson, peerNodeId, replyJson } from './peer-tls.js';
import { errorMessage, unavailable } from '../../../lib/errors.js';
import { log } from '../../../lib/log.js';
import { lockKeyOf } from './key-files.js';

export const MANAGER_KEYS_PATH = '/manager-keys';

/** The etcd document kind (`keys/<id>`) these keys live under. */
export const KEYS_KIND = 'keys';

export class ManagerKeys {
  /** `keys/ca` as etcd holds it (heard through the store's watch). */
  #sealedCaKey: Sealed | undefined;
  /** `keys/unlock` as etcd holds it. */
  #sealedUnlock: Sealed | undefined;
  /** The unlock key the key files are sealed under ('' when auto-lock is off, or not known to this node). */
  #filesKey = '';
  #locking: Promise<void> = Promise.resolve();

  constructor(private readonly members: Membership) {}

  /** A `keys/<id>` document from etcd (undefined: deleted). */
  heard(id: string, doc: unknown | undefined): void {
    if (id === 'ca') this.#sealedCaKey = doc as Sealed | undefined;
    if (id === 'unlock') {
      this.#sealedUnlock = doc as Sealed | undefined;
      void this.applyLock();
    }
  }

  /** The swarm's unlock key ('' when auto-lock is off). */
  unlockKey(): string {
    const dataKey = this.members.files?.dataKey;
    return dataKey && this.#sealedUnlock ? unseal<{ key: string }>(dataKey, this.#sealedUnlock).key : '';
  }

  /**
   * Auto-lock on or rotated (a new key), or off (''): etcd at once (unlockKey() answers the new key
   * from now on), then this node's files; the other managers seal theirs as they hear of it.
   */
  setUnlockKey(state: EtcdState, unlockKey: string): Promise<void> {
    const dataKey = this.members.files?.dataKey;
    if (!dataKey) throw unavailable('this node holds no data key');
    this.#sealedUnlock = unlockKey ? seal(dataKey, { key: unlockKey }) : undefined;
    if (this.#sealedUnlock) state.put(`${KEYS_KIND}/unlock`, this.#sealedUnlock);
    else state.del(`${KEYS_KIND}/unlock`);
    return this.applyLock();
  }

  /** A locked manager's files opened with this key: what they are sealed under until etcd says otherwise. */
  unlockedWith(unlockKey: string): void {
    this.#filesKey = unlockKey.trim();
  }

  /** Seals this manager's key files under the unlock key etcd holds (plain without one); one change at a time. */
  applyLock(): Promise<void> {
    this.#locking = this.#locking.then(async () => {
      const dataKey = this.members.files?.dataKey;
      if (!dataKey) return;
      const key = this.unlockKey();
      if (key === this.#filesKey) return;
      await this.members.setLockKey(key ? lockKeyOf(key) : undefined);
      this.#filesKey = key;
    }).catch((err) => log.warn('sealing the key files under the unlock key failed', { err: errorMessage(err) }));
    return this.#locking;
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

  /** A manager's side of `GET /manager-keys`: the data key, for a peer the cluster has as a manager. */
  serve(req: IncomingMessage, res: ServerResponse, isManager: (nodeId: string) => boolean): void {
    const peer = peerNodeId(req, res);
    if (!peer) return;
    const dataKey = this.members.files?.dataKey;
    if (!isManager(peer)) return replyJson(res, 403, { message: `node ${peer} is not a manager` });
    if (!dataKey) return replyJson(res, 503, { message: 'this node holds no data key' });
    replyJson(res, 200, { dataKey: dataKey.toString('base64') });
  }

  /** Promoted: the data key from one of the other managers (at their swarm ports); false when held already. */
  async adopt(managers: string[]): Promise<boolean> {
    const f = this.members.files;
    if (!f) throw unavailable('this node has no cluster certificates');
    if (f.dataKey) return false;
    const got = await askAny(managers, (addr) => peerGetJson<{ dataKey: string }>(addr, f, MANAGER_KEYS_PATH));
    await this.members.keepDataKey(Buffer.from(got.dataKey, 'base64'));
    await this.applyLock();
    return true;
  }

  /** Demoted: both keys go. */
  async drop(): Promise<void> {
    await this.#locking;
    this.#filesKey = '';
    await this.members.dropManagerKeys();
  }
}
