/**
 * Intents of operations that change a container's state for a moment: commit's pause, an exec's
 * process, a restart between its stop and its start, a remove between its kill and its record's deletion. Each is written (synchronously, to SQLite)
 * before the operation acts and deleted once it is over; after a kill -9 of berthd, `recover`
 * finishes or undoes what was left half done, so every container returns to the state the API last
 * acknowledged for it.
 */
import { randomHex } from '../../lib/random-hex.js';
import { log } from '../../lib/log.js';
import { errorMessage } from '../../lib/errors.js';
import type { IntentRecords, StoredIntent } from '../../state/intent-records.js';

export type IntentKind = 'commit-pause' | 'exec' | 'restart' | 'remove';

/** What recovery needs from the container engine; kept narrow so this module owns no records of it. */
export interface IntentTarget {
  status(containerId: string): string | undefined;
  unpause(containerId: string): Promise<void>;
  start(containerId: string): Promise<void>;
  remove(containerId: string): Promise<void>;
  /** Kills an exec process nobody is attached to any more and removes what its set-up left. */
  abandonExec(containerId: string, execId: string): Promise<void>;
}

export class ContainerIntents {
  constructor(private readonly records: IntentRecords) {}

  /** Records the intent; the returned function forgets it (call it once the operation is over). */
  begin(containerId: string, kind: IntentKind, data: Record<string, unknown> = {}): () => void {
    const id = randomHex(8);
    this.records.put({ id, containerId, kind, data, createdAt: Date.now() });
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.records.delete(id);
    };
  }

  /** Runs `fn` with the intent on record. */
  async around<T>(containerId: string, kind: IntentKind, fn: () => Promise<T>, data: Record<string, unknown> = {}): Promise<T> {
    const end = this.begin(containerId, kind, data);
    try {
      return await fn();
    } finally {
      end();
    }
  }

  pending(): StoredIntent[] {
    return this.records.all();
  }

  /**
   * After a restart: a container paused only by an interrupted commit is unpaused, an interrupted
   * restart is finished (the container started), so is an interrupted remove, an exec whose client
   * is gone is ended. Intents of
   * containers that no longer exist are dropped.
   */
  async recover(target: IntentTarget): Promise<void> {
    for (const i of this.records.all()) {
      const status = target.status(i.containerId);
      try {
        if (status === undefined) {
          // the container is gone
        } else if (i.kind === 'commit-pause') {
          if (status === 'paused') await target.unpause(i.containerId);
        } else if (i.kind === 'remove') {
          await target.remove(i.containerId);
        } else if (i.kind === 'restart') {
          if (status === 'exited' || status === 'created') await target.start(i.containerId);
        } else if (i.kind === 'exec' && typeof i.data.execId === 'string') {
          await target.abandonExec(i.containerId, i.data.execId);
        }
        log.info('finished an interrupted operation', { container: i.containerId, kind: i.kind });
      } catch (err) {
        log.warn('could not finish an interrupted operation', { container: i.containerId, kind: i.kind, err: errorMessage(err) });
      }
      this.records.delete(i.id);
    }
  }
}
