/**
 * What makes this node part of a cluster, below the swarm's objects: its certificates and the data
 * key (files under `<data-root>/swarm/cluster/`), the etcd member it runs (managers, unless the
 * cluster uses an external etcd), the etcd client, and the join listener on the swarm port.
 *
 * Auto-locked, a manager's node key is sealed on disk too (key-files.ts). etcd reads its key file at
 * every TLS handshake, not once, so the member it runs gets a plain copy for as long as it runs, in
 * the exec root (a tmpfs, gone at reboot), never in the data root.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EtcdPermissionDeniedError } from 'etcd3';
import { log } from '../../../lib/log.js';
import { errorMessage, unavailable } from '../../../lib/errors.js';
import { csrFor, newCa, newCsr, signNode, type CertPair, type NodeIdentity } from './pki.js';
import { EtcdMember, clientUrl, freePortOn, peerUrl } from './etcd-member.js';
import type { EtcdState } from './etcd-state.js';
import type { EtcdAccess } from './etcd-client.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { JoinListener, type JoinAnswer, type JoinAsk } from './join-protocol.js';
import { newDataKey } from './data-key.js';
import { isSealedSync, openKeyFile, readKeyFile, writeKeyFile } from './key-files.js';
import type { ClusterLocal } from '../swarm-model.js';

/** An etcd cluster berthd does not run (daemon.json / flags). */
export interface ExternalEtcd {
  endpoints: string[];
  caFile: string;
  certFile: string;
  keyFile: string;
}

export interface NodeFiles {
  ca: string;
  caKey?: string;
  cert: string;
  key: string;
  /** Managers only: workers get their tasks' secrets from a manager, opened. */
  dataKey?: Buffer;
}

export class Membership {
  files: NodeFiles | undefined;
  state: EtcdState | undefined;
  member: EtcdMember | undefined;
  readonly listener: JoinListener;
  /** While the managers are auto-locked: what the key files are sealed under (cluster/key-files.ts). */
  #lockKey: Buffer | undefined;

  constructor(
    /** `<data-root>/swarm/cluster` */
    readonly dir: string,
    /** `<exec-root>/swarm`: what must be plain only while berthd or its etcd member runs. */
    readonly runDir: string,
    readonly external: ExternalEtcd | undefined,
    handleJoin: (ask: JoinAsk) => Promise<JoinAnswer>,
    peers?: (req: IncomingMessage, res: ServerResponse) => boolean,
  ) {
    this.listener = new JoinListener(handleJoin, peers);
  }

  get etcdDir(): string {
    return join(this.dir, 'etcd', 'data');
  }

  /** The etcd member's copy of the node key (see above). */
  get memberKeyFile(): string {
    return join(this.runDir, 'etcd-node-key.pem');
  }

  get #nodeKeyFile(): string {
    return join(this.dir, 'node-key.pem');
  }

  /** Where openssl's plain keys live while it makes or signs: the exec root, never the data root. */
  async #workDir(): Promise<string> {
    await mkdir(this.runDir, { recursive: true, mode: 0o700 });
    return this.runDir;
  }

  /** A new CA, this node's certificate and a data key: the first manager of a new cluster. */
  async create(who: NodeIdentity): Promise<NodeFiles> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const work = await this.#workDir();
    const [ca, { key, csr }] = await Promise.all([newCa(work), newCsr(work)]);
    const cert = await signNode(work, ca, csr, who);
    const files = { ca: ca.cert, caKey: ca.key, cert, key, dataKey: newDataKey() };
    await this.#write(files);
    return files;
  }

  /** Keeps what a manager handed over at join. */
  async adopt(answer: JoinAnswer, key: string): Promise<NodeFiles> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const files = { ca: answer.ca, caKey: answer.caKey, cert: answer.cert, key, dataKey: answer.dataKey ? Buffer.from(answer.dataKey, 'base64') : undefined };
    await this.#write(files);
    return files;
  }

  /** The files of a node that was in a cluster before a restart. */
  async load(): Promise<NodeFiles> {
    const read = (n: string) => readFile(join(this.dir, n), 'utf8');
    const [caKey, dataKey, nodeKey] = await Promise.all([readKeyFile(join(this.dir, 'ca-key.pem')), readKeyFile(join(this.dir, 'data.key')), readKeyFile(this.#nodeKeyFile)]);
    // Sealed (the managers auto-locked): opened with the lock key unlock() was given, or the node stays locked.
    const open = (k: typeof caKey) => (k?.sealed ? (this.#lockKey ? openKeyFile(k.sealed, this.#lockKey) : undefined) : k?.text);
    const key = open(nodeKey);
    // Without its node key this node can talk to no peer and no etcd: it is locked, or its files are gone.
    if (key === undefined) throw unavailable(nodeKey ? 'the swarm is locked: this node\'s key is sealed until "docker swarm unlock"' : 'this node has no cluster key');
    const dataText = open(dataKey);
    this.files = {
      ca: await read('ca.pem'),
      caKey: open(caKey),
      cert: await read('node.pem'),
      key,
      dataKey: dataText ? Buffer.from(dataText, 'base64') : undefined,
    };
    return this.files;
  }

  async #write(f: NodeFiles): Promise<void> {
    await writeFile(join(this.dir, 'ca.pem'), f.ca);
    if (f.caKey) await writeKeyFile(join(this.dir, 'ca-key.pem'), f.caKey, this.#lockKey);
    await writeFile(join(this.dir, 'node.pem'), f.cert);
    await writeKeyFile(this.#nodeKeyFile, f.key, this.#lockKey);
    if (f.dataKey) await writeKeyFile(join(this.dir, 'data.key'), f.dataKey.toString('base64'), this.#lockKey);
    this.files = f;
  }

  /** Whether key files on disk are sealed under a lock key: a manager of an auto-locked swarm (one sealed is enough: a change may have been cut short). */
  lockedOnDisk(): boolean {
    return isSealedSync(join(this.dir, 'data.key')) || isSealedSync(this.#nodeKeyFile);
  }

  /** Loads the files with this lock key; throws when it does not open them (nothing changes then). */
  async unlock(lockKey: Buffer): Promise<void> {
    const before = this.#lockKey;
    this.#lockKey = lockKey;
    try {
      await this.load();
    } catch (err) {
      this.#lockKey = before;
      throw err;
    }
  }

  /** Auto-lock on (a lock key), rotated, or off (undefined): the key files are written again under it. */
  async setLockKey(lockKey: Buffer | undefined): Promise<void> {
    this.#lockKey = lockKey;
    const f = this.files;
    if (f?.caKey) await writeKeyFile(join(this.dir, 'ca-key.pem'), f.caKey, lockKey);
    if (f?.dataKey) await writeKeyFile(join(this.dir, 'data.key'), f.dataKey.toString('base64'), lockKey);
    if (f) await writeKeyFile(this.#nodeKeyFile, f.key, lockKey);
  }

  /** A manager without the CA key (a promoted one) keeps the cluster's copy. */
  async keepCaKey(caKey: string): Promise<void> {
    const f = this.#need();
    await writeKeyFile(join(this.dir, 'ca-key.pem'), caKey, this.#lockKey);
    f.caKey = caKey;
  }

  /** A promoted worker keeps the data key a manager handed it. */
  async keepDataKey(dataKey: Buffer): Promise<void> {
    const f = this.#need();
    await writeKeyFile(join(this.dir, 'data.key'), dataKey.toString('base64'), this.#lockKey);
    f.dataKey = dataKey;
  }

  /** A demoted manager (or a worker from before workers held none) signs and opens secrets no more. */
  async dropManagerKeys(): Promise<void> {
    if (this.files) this.files.caKey = this.files.dataKey = undefined;
    this.#lockKey = undefined;
    await rm(join(this.dir, 'ca-key.pem'), { force: true });
    await rm(join(this.dir, 'data.key'), { force: true });
    // Workers' keys are never sealed (auto-lock is the managers').
    if (this.files && isSealedSync(this.#nodeKeyFile)) await writeKeyFile(this.#nodeKeyFile, this.files.key, undefined);
  }

  /** A request for a renewed certificate of this node's key. */
  csrForOwnKey(): Promise<string> {
    const f = this.#need();
    return this.#workDir().then((work) => csrFor(work, f.key));
  }

  /**
   * A renewed certificate for the same key: node.pem swapped whole (the etcd member reads it at each
   * TLS handshake), then the swarm port and the etcd clients use it (their connections made before
   * would outlive the old one; a reconnection would not). `reconnect`: the etcd clients move to it
   * now (a renewal because the old one nears its end), else at their next reconnection.
   */
  async replaceCert(cert: string, reconnect: boolean): Promise<void> {
    const f = this.#need();
    const tmp = join(this.dir, 'node.pem.new');
    await writeFile(tmp, cert);
    await rename(tmp, join(this.dir, 'node.pem'));
    f.cert = cert;
    this.listener.setCert({ cert, ca: f.ca, key: f.key });
    if (!this.external) await this.state?.renewCert(cert, f.key, reconnect);
  }

  newCsr(): Promise<{ key: string; csr: string }> {
    return this.#workDir().then((work) => newCsr(work));
  }

  sign(csr: string, who: NodeIdentity): Promise<string> {
    const f = this.#need();
    if (!f.caKey) throw unavailable('this node cannot sign certificates: it has no CA key');
    return this.#workDir().then((work) => signNode(work, { cert: f.ca, key: f.caKey } as CertPair, csr, who));
  }

  #need(): NodeFiles {
    if (!this.files) throw unavailable('this node has no cluster certificates');
    return this.files;
  }

  /** Free client and peer ports on the address, for a new member. */
  async memberPorts(addr: string): Promise<{ clientPort: number; peerPort: number }> {
    return { clientPort: await freePortOn(addr), peerPort: await freePortOn(addr) };
  }

  /** Starts (or finds running) this node's etcd member. */
  async startMember(nodeId: string, addr: string, clusterId: string, m: NonNullable<ClusterLocal['member']>): Promise<void> {
    const f = this.#need();
    this.member?.detach();
    // Written each time: after a reboot (or an unlock) the exec root holds no copy yet.
    await mkdir(this.runDir, { recursive: true, mode: 0o700 });
    await writeFile(this.memberKeyFile, f.key, { mode: 0o600 });
    this.member = new EtcdMember({
      name: nodeId,
      dataDir: this.etcdDir,
      addr,
      clientPort: m.clientPort,
      peerPort: m.peerPort,
      initialCluster: m.initialCluster,
      initialState: m.initialState,
      clusterToken: clusterId,
      caFile: join(this.dir, 'ca.pem'),
      certFile: join(this.dir, 'node.pem'),
      keyFile: this.memberKeyFile,
    });
    await this.member.start();
  }

  /** What a member's first start names as the cluster: `<id>=https://addr:peer`. */
  static initialCluster(nodeId: string, addr: string, peerPort: number): string {
    return `${nodeId}=${peerUrl(addr, peerPort)}`;
  }

  static clientUrl = clientUrl;
  static peerUrl = peerUrl;

  /** The client to etcd, once it answers (a member just started needs a moment). */
  async connect(nodeId: string, endpoints: string[], timeoutMs = 20_000): Promise<EtcdState> {
    const access = await this.#access(endpoints);
    // Loaded here, not at start-up: the etcd client and gRPC cost ~120 ms and ~25 MiB (RSS) to load,
    // which a daemon outside any swarm never needs.
    const { EtcdState } = await import('./etcd-state.js');
    // The etcd berthd runs is followed as its members change; an external one's endpoints are its operator's.
    const state = new EtcdState(access, nodeId, undefined, !this.external);
    const deadline = Date.now() + timeoutMs;
    for (let attempt = 0; ; attempt++) {
      try {
        await state.client.get('/berth/ping').exec();
        break;
      } catch (err) {
        // A worker may not read that key (etcd-auth.ts): etcd answered all the same.
        if (err instanceof EtcdPermissionDeniedError) break;
        if (Date.now() > deadline) {
          await state.close(false);
          throw unavailable(`etcd at ${endpoints.join(', ')} does not answer: ${errorMessage(err)}`);
        }
        await new Promise((r) => setTimeout(r, Math.min(500, 50 * (attempt + 1))));
      }
    }
    this.state = state;
    return state;
  }

  async #access(endpoints: string[]): Promise<EtcdAccess> {
    if (this.external) {
      const [ca, cert, key] = await Promise.all([this.external.caFile, this.external.certFile, this.external.keyFile].map((f) => readFile(f, 'utf8')));
      return { endpoints: this.external.endpoints, ca: ca!, cert: cert!, key: key! };
    }
    const f = this.#need();
    return { endpoints, ca: f.ca, cert: f.cert, key: f.key };
  }

  /**
   * Makes this node's learner member (the one at `peer`, its peer URL: a learner not started yet has
   * no name) a voting one, once etcd says it has caught up. Fails at once, rather than waiting out
   * `timeoutMs`, when the member is no longer listed or its process says etcd removed it (a demotion
   * meanwhile: nothing will bring it back), or when `wanted` says this node wants it no more; after
   * `timeoutMs`, with what etcd last said about it.
   */
  async promoteSelf(peer: string, timeoutMs: number, wanted: () => boolean = () => true): Promise<void> {
    // Read anew for each call: the state may replace its client (etcd-state.ts).
    const etcd = () => this.state!.client;
    const deadline = Date.now() + timeoutMs;
    let why = 'it has not caught up';
    for (;;) {
      if (!wanted()) throw unavailable("this node's etcd member is not wanted any more (the node was demoted meanwhile)");
      if (this.member?.lastExit?.removed) throw unavailable("this node's etcd member was removed from the etcd cluster");
      let listed = true;
      try {
        const me = (await etcd().cluster.memberList({})).members.find((m) => m.peerURLs.includes(peer));
        if (me && !me.isLearner) return;
        listed = me !== undefined;
        if (me) return void (await etcd().cluster.memberPromote({ ID: me.ID }));
      } catch (err) {
        // Not caught up yet, no root yet (the promoting manager grants it), etcd busy: asked again.
        why = errorMessage(err);
      }
      if (!listed) throw unavailable("this node's etcd member was removed from the etcd cluster");
      if (Date.now() > deadline) {
        const exit = this.member?.lastExit?.last;
        throw unavailable(`this node's etcd member could not be promoted within ${Math.round(timeoutMs / 1000)} s: ${why}${exit ? `; the member last exited with: ${exit}` : ''}`);
      }
      await new Promise((r) => setTimeout(r, 300));
    }
  }

  async serveJoins(host: string, port: number, manager: boolean): Promise<number> {
    const f = this.#need();
    return this.listener.listen({ cert: f.cert, ca: f.ca, key: f.key }, host, port, manager);
  }

  /**
   * A promoted worker's own etcd member: added as a learner through the client it already has,
   * started, then promoted once caught up (as a joining manager's is). Answers what to keep in
   * ClusterLocal. `wanted`: whether the node still wants it (demoted meanwhile, it gives up at once).
   */
  async becomeMember(nodeId: string, addr: string, clusterId: string, wanted: () => boolean = () => true): Promise<NonNullable<ClusterLocal['member']> & { clientUrl: string }> {
    // Read anew for each call: the state may replace its client (etcd-state.ts).
    const etcd = () => this.state!.client;
    const ports = await this.memberPorts(addr);
    // The promoting manager gives this node's etcd user root (membership changes need it) meanwhile.
    let added;
    for (let i = 0; ; i++) {
      try {
        added = await etcd().cluster.memberAdd({ peerURLs: [peerUrl(addr, ports.peerPort)], isLearner: true });
        break;
      } catch (err) {
        if (!(err instanceof EtcdPermissionDeniedError) || i >= 40 || !wanted()) throw err;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    const initialCluster = added.members.map((m) => `${m.ID === added.member.ID ? nodeId : m.name}=${m.peerURLs[0]}`).join(',');
    const member = { ...ports, initialCluster, initialState: 'existing' as const };
    try {
      await this.startMember(nodeId, addr, clusterId, member);
      await this.promoteSelf(peerUrl(addr, ports.peerPort), 60_000, wanted);
    } catch (err) {
      // A member that never came up must not stay in the list: it would count against the quorum once promoted.
      await etcd().cluster.memberRemove({ ID: added.member.ID }).catch(() => undefined);
      await this.member?.stop(true);
      this.member = undefined;
      throw err;
    }
    return { ...member, clientUrl: clientUrl(addr, ports.clientPort) };
  }

  /**
   * A demoted manager's member leaves the etcd cluster; its data goes. The demoting manager removed
   * it already (this node's etcd user is no root any more); one still listed is removed here if this
   * node may, else waited for (the leader removes it), a bounded time: a member still in the list
   * must keep running, or it would cost the quorum.
   */
  async leaveMember(nodeId: string): Promise<void> {
    // Read anew for each call: the state may replace its client (etcd-state.ts).
    const etcd = () => this.state!.client;
    for (let i = 0; ; i++) {
      const me = (await etcd().cluster.memberList({})).members.find((m) => m.name === nodeId);
      if (!me) break;
      if (i >= 60) throw unavailable('this node\'s etcd member is still in the etcd cluster');
      // Refused (no root), or removed by a manager meanwhile: the list says which, next time round.
      await etcd().cluster.memberRemove({ ID: me.ID }).catch((err) => log.debug('removing this etcd member failed', { err: errorMessage(err) }));
      await new Promise((r) => setTimeout(r, 1000));
    }
    await this.member?.stop(true);
    if (!this.member && existsSync(this.etcdDir)) await new EtcdMember({ dataDir: this.etcdDir } as never).stop(true);
    this.member = undefined;
    await rm(this.memberKeyFile, { force: true });
  }

  /** Whether etcd lists a member with this peer URL. */
  async memberListed(peer: string): Promise<boolean> {
    return (await this.state!.client.cluster.memberList({})).members.some((m) => m.peerURLs.includes(peer));
  }

  /** Closes the client and listener; the member keeps running unless `removeAll` (leaving). */
  async close(removeAll: boolean): Promise<void> {
    this.listener.close();
    this.member?.detach();
    await this.state?.close(removeAll).catch((err) => log.warn('closing the etcd client failed', { err: errorMessage(err) }));
    this.state = undefined;
    if (removeAll) {
      await this.member?.stop(true);
      if (!this.member && existsSync(this.etcdDir)) await new EtcdMember({ dataDir: this.etcdDir } as never).stop(true);
      this.member = undefined;
      await rm(this.memberKeyFile, { force: true });
      await rm(this.dir, { recursive: true, force: true });
      this.files = undefined;
      this.#lockKey = undefined;
    }
  }
}
