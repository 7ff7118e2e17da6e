/**
 * Auto-lock: `swarm init --autolock` or `swarm update --autolock=true` give the swarm an unlock key
 * (kept in etcd sealed under the data key; cluster/manager-keys.ts), and every manager keeps its data
 * key, CA key and node key on disk sealed under it. A manager restarted then is locked: it answers dockerd's
 * "Swarm is encrypted..." 503 and stays out of the cluster until `docker swarm unlock` gives a key
 * that opens its key files (a wrong one is a 401, as dockerd's).
 */
import { conflict, isKind, unauthorized, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import { newUnlockKey } from './swarm-ids.js';
import { lockKeyOf } from './cluster/key-files.js';
import type { ManagerKeys } from './cluster/manager-keys.js';
import type { Membership } from './cluster/membership.js';
import type { SwarmCore } from './swarm-core.js';

const INVALID_KEY = 'swarm could not be unlocked: invalid key provided';

export class SwarmLock {
  constructor(
    private readonly core: SwarmCore,
    private readonly members: Membership,
    private readonly keys: ManagerKeys,
    /** Links the unlocked manager to the cluster again. */
    private readonly reconnect: () => void,
  ) {}

  /** The unlock key ('' without auto-lock); managers only. */
  unlockKey(): string {
    this.core.cluster();
    return this.keys.unlockKey();
  }

  /**
   * Auto-lock as the swarm's new spec says; a new key when turned on or `rotate`d. The key is in
   * etcd when this returns; the promise ends once this node's key files are sealed under it.
   */
  update(autolock: boolean, rotate: boolean): Promise<void> {
    const current = this.keys.unlockKey();
    const next = !autolock ? '' : !current || rotate ? newUnlockKey() : current;
    if (next === current) return Promise.resolve();
    const state = this.members.state;
    if (!state) throw unavailable('auto-lock needs the cluster\'s etcd, which this node has not reached yet');
    return this.keys.setUnlockKey(state, next);
  }

  /** `docker swarm unlock`: the key must open this manager's key files. */
  async unlock(unlockKey: unknown): Promise<void> {
    if (!this.core.locked) {
      this.core.cluster();
      throw conflict('swarm is not locked');
    }
    const lockKey = lockKeyOf(typeof unlockKey === 'string' ? unlockKey : '');
    try {
      await this.members.unlock(lockKey);
    } catch (err) {
      if (isKind(err, 'invalid-argument')) throw err;
      throw unauthorized(INVALID_KEY);
    }
    if (!this.members.files?.dataKey) throw unauthorized(INVALID_KEY);
    // Sealed again (or written plain) once the link hears the key etcd holds now, if it changed meanwhile.
    this.keys.unlockedWith(unlockKey as string);
    this.core.locked = false;
    log.info('the swarm is unlocked');
    this.reconnect();
  }
}
