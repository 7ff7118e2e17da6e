/**
 * etcd's own access control on the etcd berthd runs (an external one is left as its operator set it
 * up). With auth on and client certificates required, etcd takes a certificate's CN, the node id, for
 * the user. Managers' users hold the `root` role (everything, membership and auth included). A
 * worker's user holds `berth-worker`: read everything under the prefix but `configs/`, `keys/` and
 * `secrets/`, and who leads (the election's keys), and claim addresses (`addresses/`); and its own `berth-node-<id>`: write its heartbeat
 * (`alive/<id>`), its containers' addresses (`attachments/<id>`) and its tasks' status
 * (`taskstatus/<id>/...`). Users get a random password nobody uses: etcd 3.4 wants one.
 */
import { randomBytes } from 'node:crypto';
import { EtcdRoleExistsError, EtcdRoleNotFoundError, EtcdRoleNotGrantedError, EtcdUserExistsError, EtcdUserNotFoundError, type Etcd3, type IPermissionRequest } from 'etcd3';
import { Range } from 'etcd3';

export type NodeRole = 'manager' | 'worker';

const WORKERS = 'berth-worker';
const nodeRoleName = (id: string) => `berth-node-${id}`;
/** What workers never read (sorted). */
const MANAGERS_ONLY = ['configs/', 'keys/', 'secrets/'];

/** The first key after every key starting with `key`. */
function prefixEnd(key: string): string {
  const b = Buffer.from(key);
  b[b.length - 1]! += 1;
  return b.toString();
}

/** The key ranges a worker may read: the prefix minus what only managers read. */
export function workerReadRanges(prefix: string): Range[] {
  const out: Range[] = [];
  let start = prefix;
  for (const k of MANAGERS_ONLY) {
    out.push(new Range(start, prefix + k));
    start = prefixEnd(prefix + k);
  }
  out.push(new Range(start, prefixEnd(prefix)));
  return out;
}

const ignore = (...kinds: (new (...a: never[]) => Error)[]) => (err: unknown) => {
  if (!kinds.some((k) => err instanceof k)) throw err;
};

export class EtcdAuth {
  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
  ) {}

  /** The role, with these permissions (granted again each time: a role from an older berthd gets what is new). */
  async #role(name: string, perms: IPermissionRequest[]): Promise<void> {
    await this.client.role(name).create().catch(ignore(EtcdRoleExistsError));
    if (perms.length) await this.client.role(name).grant(perms);
  }

  async #user(id: string): Promise<void> {
    await this.client.user(id).create(randomBytes(24).toString('base64')).catch(ignore(EtcdUserExistsError));
  }

  /** Roles a user holds (none when it does not exist). */
  async #rolesOf(id: string): Promise<string[]> {
    return this.client.user(id).roles().then((rs) => rs.map((r) => r.name), (err) => (ignore(EtcdUserNotFoundError)(err), []));
  }

  /** The node's user, with the roles of `role` only. */
  async setNode(id: string, role: NodeRole): Promise<void> {
    await this.#user(id);
    const has = await this.#rolesOf(id);
    const want = role === 'manager' ? ['root'] : [WORKERS, nodeRoleName(id)];
    if (role === 'worker') {
      const p = this.prefix;
      await this.#role(WORKERS, [
        ...workerReadRanges(p).map((range) => ({ permission: 'Read' as const, range })),
        { permission: 'Readwrite', range: Range.prefix(`${p}addresses/`) },
        // Who leads: the etcd3 client keeps an election's keys under `election/<name>/`.
        { permission: 'Read', range: Range.prefix(`election/${p}leader/`) },
      ]);
      await this.#role(nodeRoleName(id), [
        { permission: 'Write', key: `${p}alive/${id}` },
        { permission: 'Write', key: `${p}attachments/${id}` },
        { permission: 'Readwrite', range: Range.prefix(`${p}taskstatus/${id}/`) },
      ]);
    }
    for (const r of want) if (!has.includes(r)) await this.client.user(id).addRole(r);
    for (const r of has) if (!want.includes(r)) await this.client.user(id).removeRole(r).catch(ignore(EtcdRoleNotGrantedError));
  }

  /** A node removed from the swarm: its user and role go. */
  async removeNode(id: string): Promise<void> {
    await this.client.user(id).delete().catch(ignore(EtcdUserNotFoundError));
    await this.client.role(nodeRoleName(id)).delete().catch(ignore(EtcdRoleNotFoundError));
  }

  /**
   * Turns auth on (once; again is a no-op): `root` first, as etcd requires, then a user for every
   * node of the cluster, so that no node is locked out.
   */
  async enable(nodes: Iterable<{ id: string; role: NodeRole }>): Promise<void> {
    await this.#role('root', []);
    await this.#user('root');
    if (!(await this.#rolesOf('root')).includes('root')) await this.client.user('root').addRole('root');
    for (const n of nodes) await this.setNode(n.id, n.role);
    await this.client.auth.authEnable();
  }
}
