/**
 * Node certificates are renewed before they expire, and when the node's role changes, as swarmkit's
 * are: the same node.pem is the swarm port's and etcd's client and peer certificate, so one that
 * expires stops the node (all of them, signed at once, stop the cluster). A node whose certificate
 * passed a random point between half and four fifths of its validity, or names another role than
 * the node's record, asks a manager over the swarm port (mutual TLS, with the certificate it has)
 * for a new one for the same key. The manager signs it for the node that certificate names, with
 * the role and address of that node's record, valid for CAConfig.NodeCertExpiry. The node swaps
 * node.pem whole and reconnects what holds it (cluster/membership.ts replaceCert). A node that was
 * away past its certificate's end can renew no more: it leaves and joins again, as in swarmkit.
 */
import { X509Certificate, createPublicKey } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorMessage, unavailable } from '../../lib/errors.js';
import { log } from '../../lib/log.js';
import type { Membership } from './cluster/membership.js';
import type { ManagerKeys } from './cluster/manager-keys.js';
import { roleOfNode } from './cluster/etcd-auth.js';
import { askAny, peerNodeId, peerPostJson, readPeerJson, replyJson } from './cluster/peer-tls.js';
import { SwarmPart, type SwarmCore } from './swarm-core.js';
import { SECOND_NS, type ClusterRecord, type NodeRecord } from './swarm-model.js';

export const NODE_CERT_PATH = '/node-cert';

/** The longest wait between two looks at the certificate: a clock set forward is noticed within it. */
const MAX_CHECK_MS = 3600_000;
/** A renewal that failed (no manager answered) is tried again after this long at most. */
const RETRY_MS = 30_000;

/**
 * How long a node certificate is valid: CAConfig.NodeCertExpiry (90 days by default, 1 hour at
 * least as dockerd's). BERTH_SWARM_NODE_CERT_SECONDS, for tests only, sets a shorter one.
 */
export function certSeconds(c: ClusterRecord, env: NodeJS.ProcessEnv = process.env): number {
  const forced = Number(env.BERTH_SWARM_NODE_CERT_SECONDS);
  if (Number.isFinite(forced) && forced > 0) return forced;
  return Math.max(3600, Math.floor(Number(c.spec.CAConfig?.NodeCertExpiry ?? 90 * 24 * 3600 * SECOND_NS) / SECOND_NS));
}

/** When a certificate is due for renewal (ms since the epoch): between half and four fifths of its validity, at random (nodes signed together do not all ask at once). */
export function renewalDue(cert: X509Certificate, random = Math.random()): number {
  const from = Date.parse(cert.validFrom);
  const to = Date.parse(cert.validTo);
  return from + (to - from) * (0.5 + 0.3 * random);
}

/** Whether the certificate was signed for this role (its OU). */
export const certNamesRole = (cert: X509Certificate, role: string) => cert.subject.split('\n').includes(`OU=swarm-${role}`);

export class NodeCerts extends SwarmPart {
  #timer: NodeJS.Timeout | undefined;
  /** The certificate the due time below is for, and that time. */
  #dueFor = '';
  #due = 0;
  #checking = false;

  constructor(
    core: SwarmCore,
    private readonly members: Membership,
    private readonly keys: ManagerKeys,
    /** The other managers' swarm ports. */
    private readonly managers: () => string[],
  ) {
    super(core);
  }

  /** Looks at the certificate now, then whenever it is due. */
  start(): void {
    this.#schedule(0);
  }

  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** This node's role changed: its certificate follows now, not when it is due. */
  roleChanged(): void {
    if (this.#timer) this.#schedule(0);
  }

  #schedule(ms: number): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#check(), ms);
    this.#timer.unref();
  }

  async #check(): Promise<void> {
    if (this.#checking) return;
    this.#checking = true;
    let next = RETRY_MS;
    try {
      next = await this.#checkOnce();
    } catch (err) {
      log.warn('renewing this node\'s certificate failed', { err: errorMessage(err) });
      // Before a certificate ends, tries come more often: never fewer than ten in what is left.
      const end = this.#dueFor ? Date.parse(new X509Certificate(this.#dueFor).validTo) : Infinity;
      next = Math.max(1000, Math.min(RETRY_MS, (end - Date.now()) / 10));
    } finally {
      this.#checking = false;
    }
    if (this.#timer && !this.core.closed) this.#schedule(next);
  }

  /** Renews when due or when the role changed; answers how long until the next look. */
  async #checkOnce(): Promise<number> {
    const c = this.store.cluster;
    const f = this.members.files;
    if (!c || !f || this.core.closed) return RETRY_MS;
    const cert = new X509Certificate(f.cert);
    if (this.#dueFor !== f.cert) {
      this.#dueFor = f.cert;
      this.#due = renewalDue(cert);
    }
    const role = roleOfNode(this.store.nodes.get(c.node.id) ?? c.node) ?? 'worker';
    const roleChanged = !certNamesRole(cert, role);
    if (Date.now() < this.#due && !roleChanged) return Math.max(1000, Math.min(MAX_CHECK_MS, this.#due - Date.now()));
    const renewed = new X509Certificate(await this.#renew(role, !roleChanged));
    log.info('this node\'s certificate was renewed', { role, why: roleChanged ? 'role' : 'due', notAfter: renewed.validTo });
    // A manager whose view of this node's record lags signed the old role: asked again soon.
    return certNamesRole(renewed, role) ? 0 : 5000;
  }

  /** A new certificate for this node's key: signed here by a manager that can, else by another manager. */
  async #renew(role: string, reconnect: boolean): Promise<string> {
    const f = this.members.files!;
    const self = this.store.selfId;
    const csr = await this.members.csrForOwnKey();
    let cert: string | undefined;
    if (role === 'manager') cert = await this.#sign(self, csr).catch(() => undefined);
    cert ??= (await askAny(this.managers(), (addr) => peerPostJson<{ cert: string }>(addr, f, NODE_CERT_PATH, { csr }))).cert;
    // Kept only when it is this node's, for its key, from its CA.
    const x = new X509Certificate(cert);
    const cn = x.subject.split('\n').find((l) => l.startsWith('CN='));
    if (cn !== `CN=${self}` || !x.publicKey.equals(createPublicKey(f.key)) || !x.verify(new X509Certificate(f.ca).publicKey)) {
      throw unavailable('the manager answered a certificate that is not this node\'s');
    }
    await this.members.replaceCert(cert, reconnect);
    return cert;
  }

  /** A manager signs a certificate for node `nodeId` as its record says (role, address), or throws. */
  async #sign(nodeId: string, csr: string, record: NodeRecord | undefined = this.store.nodes.get(nodeId)): Promise<string> {
    const c = this.store.cluster;
    if (!c || c.node.spec.Role !== 'manager') throw unavailable('this node is no manager');
    if (!record) throw unavailable(`node ${nodeId} is not part of this swarm`);
    await this.keys.ensureCaKey();
    return this.members.sign(csr, { nodeId, role: roleOfNode(record) ?? 'worker', clusterId: c.id, ips: [record.addr], seconds: certSeconds(c) });
  }

  /** A manager's side of `POST /node-cert`: a certificate for the asking node, as the cluster has it now. */
  async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const peer = peerNodeId(req, res);
    if (!peer) return;
    const ask = (await readPeerJson(req, res)) as { csr?: unknown } | undefined;
    if (ask === undefined) return;
    if (typeof ask?.csr !== 'string') return replyJson(res, 400, { message: 'malformed certificate request' });
    const record = this.store.nodes.get(peer);
    if (!record) return replyJson(res, 403, { message: `node ${peer} is not part of this swarm` });
    try {
      replyJson(res, 200, { cert: await this.#sign(peer, ask.csr, record) });
    } catch (err) {
      replyJson(res, 503, { message: errorMessage(err) });
    }
  }
}
