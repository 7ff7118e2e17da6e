/**
 * What nodes ask each other over the swarm port (mutual TLS, cluster/peer-tls.ts): a task's log
 * (task-logs.ts), a task's secrets and configs, and the managers' keys (cluster/manager-keys.ts).
 * Workers hold no data key: a manager opens the secrets and configs of a task for the node the task
 * is assigned to, and for no other.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { refId, refsOf, type BlobKind } from './secrets.js';
import { askAny, peerGetJson, peerNodeId, replyJson } from './cluster/peer-tls.js';
import { MANAGER_KEYS_PATH, type ManagerKeys } from './cluster/manager-keys.js';
import type { Membership } from './cluster/membership.js';
import { serveTaskLogs } from './task-logs.js';
import type { SwarmCore } from './swarm-core.js';
import type { TaskRecord } from './swarm-model.js';
import type { BlobData } from './task-files.js';
import { unavailable } from '../../lib/errors.js';

/** On the wire: kind → id → base64 data. */
type WireBlobs = Record<BlobKind, Record<string, string>>;

const TASK_SECRETS = '/task-secrets/';

export class SwarmPeers {
  constructor(
    private readonly core: SwarmCore,
    private readonly members: Membership,
    private readonly keys: ManagerKeys,
  ) {}

  /** Serves another node's GET; false when the path is none of these. */
  serve(req: IncomingMessage, res: ServerResponse): boolean {
    const { store, d } = this.core;
    const path = req.url ?? '';
    if (path.startsWith('/task-logs/')) {
      void serveTaskLogs(req, res, (id) => {
        const t = store.tasks.get(id);
        return t && t.nodeId === store.selfId ? t.status.containerId : undefined;
      }, d.containers);
    } else if (path.startsWith(TASK_SECRETS)) {
      this.#serveTaskSecrets(req, res, decodeURIComponent(path.slice(TASK_SECRETS.length)));
    } else if (path === MANAGER_KEYS_PATH) {
      this.keys.serve(req, res, (id) => store.nodes.get(id)?.spec.Role === 'manager');
    } else {
      return false;
    }
    return true;
  }

  /** The secrets and configs of task `t`: this node's own when it holds the data key, else a manager's answer. */
  async taskData(t: TaskRecord): Promise<BlobData> {
    const { store, blobs } = this.core;
    // Right after a restart, before the link to etcd loaded them, the certificates are read here.
    const f = this.members.files ?? (store.clustered ? await this.members.load() : undefined);
    if (!store.clustered || f?.dataKey) return (kind, id) => blobs[kind].data(id);
    if (!f) throw unavailable('this node has no cluster certificates');
    const wire = await askAny(this.managerAddrs(), (addr) => peerGetJson<WireBlobs>(addr, f, `${TASK_SECRETS}${encodeURIComponent(t.id)}`));
    return (kind, id) => {
      const b64 = wire[kind]?.[id];
      return typeof b64 === 'string' ? Buffer.from(b64, 'base64') : undefined;
    };
  }

  /** The swarm ports of the other managers, those with a heartbeat first. */
  managerAddrs(): string[] {
    const { store } = this.core;
    const managers = [...store.nodes.values()].filter((n) => n.spec.Role === 'manager' && n.id !== store.selfId && n.peerAddr);
    return managers.sort((a, b) => Number(store.alive.has(b.id)) - Number(store.alive.has(a.id))).map((n) => n.peerAddr!);
  }

  /** A manager's side: the opened data of what the task refers to, for the node it is assigned to only. */
  #serveTaskSecrets(req: IncomingMessage, res: ServerResponse, taskId: string): void {
    const peer = peerNodeId(req, res);
    if (!peer) return;
    const { store, blobs } = this.core;
    const t = store.tasks.get(taskId);
    if (!t || t.nodeId !== peer) return replyJson(res, 404, { message: `task ${taskId} is not assigned to node ${peer}` });
    if (!this.members.files?.dataKey) return replyJson(res, 503, { message: 'this node holds no data key' });
    const out: WireBlobs = { secret: {}, config: {} };
    for (const kind of ['secret', 'config'] as const) {
      for (const ref of refsOf({ TaskTemplate: t.spec }, kind)) {
        const id = refId(ref, kind);
        const data = id ? blobs[kind].data(id) : undefined;
        if (id && data) out[kind][id] = data.toString('base64');
      }
    }
    replyJson(res, 200, out);
  }
}
