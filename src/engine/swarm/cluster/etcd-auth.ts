/**
 * etcd's own access control on the etcd berthd runs (an external one is left as its operator set it
 * up). With auth on and client certificates required, etcd takes a certificate's CN, the node id, for
 * the user. Managers' users hold the `root` role (everything, membership and auth included). A
 * worker's user holds `berth-worker`: read everything under the prefix but `configs/`, `keys/` and
 * `secrets/`, and who leads (the election's keys); and its own `berth-node-<id>`: write its heartbeat
 * (`alive/<id>`), its containers' addresses (`attachments/<id>`) and its tasks' status
 * (`taskstatus/<id>/...`). Address claims (`addresses/`) a worker only reads: a manager makes and
 * releases them for it (swarm-peers.ts), so no node can squat or drop another's. Users get a random
 * password nobody uses: etcd 3.4 wants one. The leader reconciles the users with the node records
 * (`reconcile`), so a role change a manager left half-done is finished.
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

/**
 * A node document's role as etcd holds it (`{d: NodeRecord}`); a record without one is a manager's,
 * as everywhere in the swarm. Undefined when the document does not read: the node is there, its role
 * unknown, so neither its user nor its etcd member may be taken for a gone node's.
 */
export function roleOfNodeDoc(value: string): NodeRole | undefined {
  try {
    return roleOfNode((JSON.parse(value) as { d?: unknown } | null)?.d);
  } catch {
    return undefined;
  }
}

/** The role a node record says (no `Role`: a manager, as everywhere in the swarm); undefined when it holds no spec. */
export function roleOfNode(record: unknown): NodeRole | undefined {
  const spec = (record as { spec?: unknown } | null | undefined)?.spec;
  if (typeof spec !== 'object' || spec === null) return undefined;
  return (spec as { Role?: unknown }).Role === 'worker' ? 'worker' : 'manager';
}

/** The etcd roles a node's user holds in `role`. */
const wantedRoles = (id: string, role: NodeRole): string[] => (role === 'manager' ? ['root'] : [WORKERS, nodeRoleName(id)]);

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

  /** What every worker may: read all but what only managers read, and who leads. */
  async #workersRole(): Promise<void> {
    const p = this.prefix;
    await this.#role(WORKERS, [
      ...workerReadRanges(p).map((range) => ({ permission: 'Read' as const, range })),
      // Read only; granted on this exact range, it replaces the Readwrite an older berthd granted there.
      { permission: 'Read', range: Range.prefix(`${p}addresses/`) },
      // Who leads: the etcd3 client keeps an election's keys under `election/<name>/`.
      { permission: 'Read', range: Range.prefix(`election/${p}leader/`) },
    ]);
  }

  /** The node's user, with the roles of `role` only. */
  async setNode(id: string, role: NodeRole): Promise<void> {
    await this.#user(id);
    const has = await this.#rolesOf(id);
    const want = wantedRoles(id, role);
    if (role === 'worker') {
      const p = this.prefix;
      await this.#workersRole();
      await this.#role(nodeRoleName(id), [
        { permission: 'Write', key: `${p}alive/${id}` },
        { permission: 'Write', key: `${p}attachments/${id}` },
        { permission: 'Readwrite', range: Range.prefix(`${p}taskstatus/${id}/`) },
      ]);
    }
    for (const r of want) if (!has.includes(r)) await this.client.user(id).addRole(r);
    for (const r of has) if (!want.includes(r)) await this.client.user(id).removeRole(r).catch(ignore(EtcdRoleNotGrantedError));
  }

  /**
   * The node records as etcd holds them (id → role): what the users must match. Read after the users
   * (see reconcile), a node admitted meanwhile is there, its record being written before its user.
   */
  async nodeRoles(): Promise<Map<string, NodeRole | undefined>> {
    const docs = await this.client.getAll().prefix(`${this.prefix}nodes/`).strings();
    const out = new Map<string, NodeRole | undefined>();
    for (const [key, value] of Object.entries(docs)) out.set(key.slice(`${this.prefix}nodes/`.length), roleOfNodeDoc(value));
    return out;
  }

  /** The role node `id`'s record says now (undefined: gone or unreadable). */
  async #roleNow(id: string): Promise<NodeRole | undefined> {
    const value = await this.client.get(`${this.prefix}nodes/${id}`).string();
    return value === null ? undefined : roleOfNodeDoc(value);
  }

  /**
   * Every node's user as its record says, the users of nodes that are gone removed (root stays).
   * Answers the records it went by, and the ids of the users it changed. Records that lack `self`
   * (the node reconciling) are no sound basis: nothing changes then. A node whose record does not
   * read (undefined role) still exists: its user is left as it is.
   */
  async reconcile(self: string): Promise<{ nodes: Map<string, NodeRole | undefined>; changed: string[] }> {
    const users = (await this.client.getUsers()).map((u) => u.name);
    const nodes = await this.nodeRoles();
    const changed: string[] = [];
    if (!nodes.has(self)) return { nodes, changed };
    // Workers whose users are right still get what a role from an older berthd lacks (or had too much of).
    if ([...nodes.values()].includes('worker')) await this.#workersRole();
    for (const id of users) {
      if (id === 'root' || nodes.has(id)) continue;
      await this.removeNode(id);
      changed.push(id);
    }
    for (const [id, role] of nodes) {
      if (role === undefined) continue;
      // A user that does not exist holds no role: #rolesOf gives [], never what is wanted.
      const has = await this.#rolesOf(id);
      const want = wantedRoles(id, role);
      if (has.length === want.length && want.every((r) => has.includes(r))) continue;
      // Its record read again first: a role change made since (its manager sets the user itself, and
      // asks for another pass) must not be undone from the older record, even for a moment (a
      // promoted node's member and watch need root).
      if ((await this.#roleNow(id)) !== role) continue;
      await this.setNode(id, role);
      changed.push(id);
    }
    return { nodes, changed };
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
