/**
 * What nodes ask each other over the swarm port (mutual TLS, cluster/peer-tls.ts): a task's log
 * (task-logs.ts), a task's secrets and configs, the managers' keys (cluster/manager-keys.ts), a
 * renewed node certificate (node-certs.ts), and a worker's address claims. Workers hold no data key: a manager opens the secrets and configs of a
 * task for the node the task is assigned to, and for no other. Nor may workers write address claims
 * in etcd (cluster/etcd-auth.ts): a manager makes and releases them for the node its certificate
 * names, in the same transaction as its own, as swarmkit's managers allocate addresses.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import { refId, refsOf, type BlobKind } from './secrets.js';
import { askAny, decodePathPart, isCurrentManager, peerCertRole, peerGetJson, peerNodeId, peerPostJson, readPeerJson, replyJson } from './cluster/peer-tls.js';
import { MANAGER_KEYS_PATH, type ManagerKeys } from './cluster/manager-keys.js';
import type { Membership } from './cluster/membership.js';
import { serveTaskLogs } from './task-logs.js';
import { NODE_CERT_PATH, NodeCerts } from './node-certs.js';
import type { SwarmCore } from './swarm-core.js';
import type { TaskRecord } from './swarm-model.js';
import type { BlobData } from './task-files.js';
import { errorMessage, unavailable } from '../../lib/errors.js';
import type { ClaimStore } from './overlay-addresses.js';
import { INGRESS_ENDPOINT } from './ingress-mesh.js';

/** On the wire: kind → id → base64 data. */
type WireBlobs = Record<BlobKind, Record<string, string>>;

const TASK_SECRETS = '/task-secrets/';
const ADDRESS_CLAIMS = '/address-claims';

/** A worker's claim (or release) of `ip` on overlay network `network` for its container. */
interface ClaimAsk {
  op: 'claim' | 'release';
  network: string;
  ip: string;
  container: string;
}

export class SwarmPeers {
  /** This node's certificate renewed in time, and a manager's side of others' renewals. */
  readonly certs: NodeCerts;

  constructor(
    private readonly core: SwarmCore,
    private readonly members: Membership,
    private readonly keys: ManagerKeys,
  ) {
    this.certs = new NodeCerts(core, members, keys, () => this.managerAddrs());
  }

  /** Serves another node's GET; false when the path is none of these. */
  serve(req: IncomingMessage, res: ServerResponse): boolean {
    const { store, d } = this.core;
    const path = req.url ?? '';
    if (path.startsWith('/task-logs/')) {
      // Only managers serve `docker service logs`: a worker, or a node demoted or removed since its
      // certificate was signed, reads no task's log.
      const peer = peerNodeId(req, res);
      if (!peer) return true;
      if (!isCurrentManager(peerCertRole(req), store.nodes.get(peer))) {
        replyJson(res, 403, { message: `node ${peer} is not a manager` });
        return true;
      }
      void serveTaskLogs(req, res, (id) => {
        const t = store.tasks.get(id);
        return t && t.nodeId === store.selfId ? t.status.containerId : undefined;
      }, d.containers);
    } else if (path.startsWith(TASK_SECRETS)) {
      this.#serveTaskSecrets(req, res, path.slice(TASK_SECRETS.length));
    } else if (path === ADDRESS_CLAIMS && req.method === 'POST') {
      void this.#serveClaim(req, res).catch((err) => replyJson(res, 503, { message: errorMessage(err) }));
    } else if (path === NODE_CERT_PATH && req.method === 'POST') {
      void this.certs.serve(req, res).catch((err) => replyJson(res, 503, { message: errorMessage(err) }));
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

  /**
   * Where this node's address claims go: a manager makes them in etcd itself, a worker asks a
   * manager. Undefined outside a cluster.
   */
  claimStore(): ClaimStore | undefined {
    const { store } = this.core;
    const state = this.members.state;
    if (!store.clustered || !state) return undefined;
    if (store.cluster?.node.spec.Role === 'manager') return state;
    const ask = async (op: ClaimAsk['op'], key: string, doc: unknown) => {
      const f = this.members.files;
      if (!f) throw unavailable('this node has no cluster certificates');
      // `addresses/<network>/<ip>`; the node is the one the certificate names.
      const [, network = '', ip = ''] = key.split('/');
      const body: ClaimAsk = { op, network, ip, container: String((doc as { container?: unknown }).container) };
      return askAny(this.managerAddrs(), (addr) => peerPostJson<{ taken?: boolean; holder?: unknown }>(addr, f, ADDRESS_CLAIMS, body));
    };
    return {
      claim: async (key, doc) => {
        const r = await ask('claim', key, doc);
        return r.taken === true ? { taken: true } : { taken: false, holder: r.holder };
      },
      release: async (key, doc) => void (await ask('release', key, doc)),
    };
  }

  /** A manager's side: the claim or release a worker asks for, in that worker's name only. */
  async #serveClaim(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const peer = peerNodeId(req, res);
    if (!peer) return;
    const ask = (await readPeerJson(req, res)) as Partial<ClaimAsk> | undefined;
    if (ask === undefined) return;
    const { store, d } = this.core;
    const state = this.members.state;
    if (!state || store.cluster?.node.spec.Role !== 'manager') return replyJson(res, 503, { message: 'this node is no manager' });
    if (!store.nodes.has(peer)) return replyJson(res, 403, { message: `node ${peer} is not part of this swarm` });
    const { op, network, ip, container } = ask ?? {};
    if ((op !== 'claim' && op !== 'release') || typeof container !== 'string' || !(container === INGRESS_ENDPOINT || /^[0-9a-f]{1,64}$/.test(container)) || typeof ip !== 'string' || !isIP(ip)) {
      return replyJson(res, 400, { message: 'malformed address claim' });
    }
    if (typeof network !== 'string' || !d.network?.list().some((n) => n.overlay && n.id === network)) return replyJson(res, 404, { message: `network ${String(network)} not found` });
    const key = `addresses/${network}/${ip}`;
    const doc = { node: peer, container };
    if (op === 'claim') return replyJson(res, 200, await state.claim(key, doc, peer));
    await state.release(key, doc, peer);
    replyJson(res, 200, {});
  }

  /** The swarm ports of the other managers, those with a heartbeat first. */
  managerAddrs(): string[] {
    const { store } = this.core;
    const managers = [...store.nodes.values()].filter((n) => n.spec.Role === 'manager' && n.id !== store.selfId && n.peerAddr);
    return managers.sort((a, b) => Number(store.alive.has(b.id)) - Number(store.alive.has(a.id))).map((n) => n.peerAddr!);
  }

  /** A manager's side: the opened data of what the task refers to, for the node it is assigned to only. */
  #serveTaskSecrets(req: IncomingMessage, res: ServerResponse, encodedId: string): void {
    const peer = peerNodeId(req, res);
    if (!peer) return;
    const taskId = decodePathPart(encodedId);
    if (taskId === undefined) return replyJson(res, 400, { message: 'malformed task id' });
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
