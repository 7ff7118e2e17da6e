/**
 * The composition root: read the configuration, build the stores and drivers, hand them to the
 * engine, and serve the API. Nothing else in the tree wires components together.
 */
import { mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, ConfigError, USAGE, type DaemonConfig } from './config.js';
import { log, setLogLevel } from './lib/log.js';
import { markTopDir } from './lib/fs-topdir.js';
import { closeInheritedDescriptors } from './lib/inherited-fds.js';
import { openDatabase } from './state/db.js';
import { ImageRecords } from './state/image-records.js';
import { ContentStore } from './images/content-store.js';
import { LayerStore } from './images/layer-store.js';
import { RegistryClient } from './registry/registry-client.js';
import { EventBus } from './engine/events.js';
import { ImageService } from './engine/images/image-service.js';
import { Engine } from './engine/engine.js';
import { hostFacts } from './engine/system.js';
import { Router, SERVER_VERSION } from './api/router.js';
import { listen, closeListeners } from './api/server.js';
import { systemRoutes } from './api/routes/system.js';
import { imageRoutes } from './api/routes/images.js';
import { imageTransferRoutes } from './api/routes/image-transfer.js';
import { ImageTransfer } from './engine/image-transfer/image-transfer.js';
import { LayerBlobRecords } from './state/layer-blob-records.js';
import { containerRoutes } from './api/routes/containers.js';
import { containerLogRoutes } from './api/routes/container-logs.js';
import { containerExtraRoutes } from './api/routes/container-extras.js';
import { containerArchiveRoutes } from './api/routes/container-archive.js';
import { HealthMonitor } from './engine/containers/healthcheck.js';
import { ContainerRecords } from './state/container-records.js';
import { IntentRecords } from './state/intent-records.js';
import { SwarmObjectRecords } from './state/swarm-object-records.js';
import { ContainerIntents } from './engine/intents/container-intents.js';
import { ContainerService } from './engine/containers/container-service.js';
import { RuntimeProcesses } from './engine/containers/container-processes.js';
import { RuntimeDriver } from './runtime/runtime-driver.js';
import { BridgeDriver } from './network/bridge-driver.js';
import { NetworkRecords } from './state/network-records.js';
import { NetworkController } from './engine/networks/network-controller.js';
import { ContainerNetworkSetup } from './engine/networks/container-networking.js';
import { NetworkService } from './engine/networks/networks.js';
import { networkRoutes } from './api/routes/networks.js';
import { attachRoutes } from './api/routes/attach.js';
import { execRoutes } from './api/routes/exec.js';
import { SwarmRecords } from './state/swarm-records.js';
import { SwarmService } from './engine/swarm/swarm.js';
import { taskImagePuller } from './engine/swarm/swarm-pull.js';
import { swarmRoutes } from './api/routes/swarm.js';
import { VolumeRecords } from './state/volume-records.js';
import { LocalDriver } from './engine/volumes/local-driver.js';
import { VolumeService } from './engine/volumes/volume-service.js';
import { volumeRoutes } from './api/routes/volumes.js';
import { DiskUsageService } from './engine/disk-usage.js';
import { systemDfRoutes, emptyBuildPruneRoute } from './api/routes/system-df.js';
import { isRunningLike } from './engine/containers/container-model.js';
import { BuildCacheRecords } from './state/build-cache-records.js';
import { BuildService, type Puller } from './engine/build/build-service.js';
import { buildRoutes } from './api/routes/build.js';

async function main(): Promise<void> {
  let config: DaemonConfig | 'help' | 'version';
  try {
    config = loadConfig(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`berthd: ${(err as Error).message}\n\n${USAGE}`);
    process.exitCode = err instanceof ConfigError ? 1 : 125;
    return;
  }
  if (config === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (config === 'version') {
    process.stdout.write(`Berth version ${SERVER_VERSION}\n`);
    return;
  }
  setLogLevel(config.logLevel);
  // Before anything is spawned: what berthd starts must not hold its starter's pipes (lib/inherited-fds.ts).
  const inherited = closeInheritedDescriptors();
  if (inherited.length) log.info('closed inherited descriptors', { descriptors: inherited.map((d) => `${d.fd} ${d.target}`) });

  mkdirSync(config.dataRoot, { recursive: true, mode: 0o711 });
  mkdirSync(config.execRoot, { recursive: true, mode: 0o711 });
  writeFileSync(config.pidfile, `${process.pid}\n`);

  const db = openDatabase(join(config.dataRoot, 'berth.db'));
  const content = new ContentStore(config.dataRoot);
  // No syncfs per layer: a kill -9 loses nothing in the page cache, and the flush costs seconds per
  // large layer. Only a power loss could leave a recorded layer with unflushed files.
  const layers = new LayerStore(config.dataRoot, { sync: false });
  // Each layer and each container is a tree of its own, made and deleted whole: the file system may
  // place them apart, away from inodes it freed moments ago (lib/fs-topdir.ts).
  for (const dir of [join(config.dataRoot, 'layers'), join(config.dataRoot, 'containers')]) {
    mkdirSync(dir, { recursive: true });
    markTopDir(dir);
  }
  await content.cleanIngest();
  await layers.cleanTemp();

  // Services get what they need in their constructors; nothing is patched in afterwards. Where two
  // need each other (containers and the services that call back into them), the one built first
  // gets a callback to the later one, which it calls only once start-up has built both.
  const events = new EventBus();
  const registry = new RegistryClient({ mirrors: config.registryMirrors, insecureRegistries: config.insecureRegistries });
  const images = new ImageService({
    records: new ImageRecords(db),
    layers,
    content,
    events,
    registry,
    usage: (imageId) => containers.imageUsage(imageId),
    layerBlobs: new LayerBlobRecords(db),
  });
  // Layer dirs a killed pull left behind, recorded by no image.
  await images.sweepUnrecordedLayers();

  const runtime = new RuntimeDriver({ stateDir: join(config.execRoot, 'runtime'), defaultRuntime: config.defaultRuntime, cpuRealtime: config.cpuRtPeriod || config.cpuRtRuntime ? { period: config.cpuRtPeriod, runtime: config.cpuRtRuntime } : undefined });
  await runtime.init();
  // Volume users are the containers whose mount points name the volume.
  const volumes = new VolumeService({
    records: new VolumeRecords(db),
    driver: new LocalDriver(join(config.dataRoot, 'volumes')),
    events,
    users: (name) => containers.all().filter((c) => c.mountPoints?.some((m) => m.Type === 'volume' && m.Name === name)).map((c) => c.id),
  });
  // Containers restarted during recovery start before the swarm exists (and before it reaches etcd).
  let swarmMade: SwarmService | undefined;
  const network = new NetworkController({ records: new NetworkRecords(db), driver: new BridgeDriver({ execRoot: config.execRoot, prefix: config.networkPrefix }), addressClaims: () => swarmMade?.overlay?.addresses });
  await network.init();
  const networking = new ContainerNetworkSetup(network);
  const processes = new RuntimeProcesses(runtime, networking, (id) => containers.containerDir(id), (id, exit) => containers.handleExit(id, exit), config.logOpts, (idOrName) => containers.find(idOrName), () => containers.all());
  const containers = new ContainerService({
    records: new ContainerRecords(db),
    images,
    events,
    dataRoot: config.dataRoot,
    defaultRuntime: config.defaultRuntime,
    volumes,
    intents: new ContainerIntents(new IntentRecords(db)),
    processes,
    logOpts: config.logOpts,
  });
  const networks = new NetworkService(network, containers, events, () => swarm.active === true, () => swarm.overlay);
  // A renamed container answers to its new name in DNS.
  events.subscribe((e) => {
    if (e.Type === 'container' && e.Action === 'rename') void network.renameContainer(e.Actor.ID, e.Actor.Attributes.name ?? '').catch(() => undefined);
  });
  containers.load();
  await containers.recover();
  await volumes.adopt(containers.all().filter((c) => isRunningLike(c.state)));
  // A container that is not running holds no network: a kill -9 between an exit and its release
  // leaves endpoints, ports and a namespace that the next start would trip on.
  await network.sweepContainers((id) => {
    const c = containers.find(id);
    return c !== undefined && isRunningLike(c.state);
  });
  const host = hostFacts();
  const pull: Puller = (ref, o, p) => images.pull(ref, o, p);
  const swarm = new SwarmService({ records: new SwarmRecords(db), secretRecords: new SwarmObjectRecords(db, 'swarm_secrets'), configRecords: new SwarmObjectRecords(db, 'swarm_configs'), containers, images, events, host, pull: taskImagePuller(pull),
    externalEtcd: config.swarmEtcdEndpoints.length ? { endpoints: config.swarmEtcdEndpoints, caFile: config.swarmEtcdCaCert, certFile: config.swarmEtcdCert, keyFile: config.swarmEtcdKey } : undefined, network, execRoot: config.execRoot,
    disconnect: (n, c) => networks.disconnect(n, c, true) });
  swarmMade = swarm;
  swarm.start();
  const builds = new BuildService(containers, images, new BuildCacheRecords(db), pull, config.dataRoot);
  await builds.cleanWork();
  const engine = new Engine({
    config,
    events,
    images,
    registry,
    host,
    cgroupVersion: runtime.host.cgroupLayout.kind === 'v2' ? '2' : '1',
    containerCounts: () => containers.counts(),
    swarm,
  });

  const router = new Router({ routeLog: process.env.BERTHD_ROUTE_LOG });
  systemRoutes(router, engine);
  imageRoutes(router, engine, imageTransferRoutes(router, new ImageTransfer(images, registry)));
  containerRoutes(router, engine, containers);
  containerLogRoutes(router, containers);
  networkRoutes(router, networks);
  volumeRoutes(router, volumes);
  systemDfRoutes(router, new DiskUsageService({
    images,
    containers,
    volumes,
    buildCache: async () => {
      const { records, size } = builds.cacheUsage();
      return { items: records, totals: { activeCount: 0, totalCount: records.length, reclaimable: size, totalSize: size } };
    },
  }), containers, volumes);
  attachRoutes(router, containers);
  execRoutes(router, containers);
  containerExtraRoutes(router, containers);
  containerArchiveRoutes(router, containers);
  swarmRoutes(router, swarm);
  buildRoutes(router, builds);
  // Last: `docker system prune` calls /build/prune and fails on a 404 while no builder answers it.
  if (!router.has('POST', '/build/prune')) emptyBuildPruneRoute(router);
  const health = new HealthMonitor(containers, runtime);
  health.start();

  const listeners = await listen(router, config.hosts, config.group, config);
  router.warmUp();
  log.info('berthd started', { version: SERVER_VERSION, dataRoot: config.dataRoot, pid: process.pid });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info('shutting down', { signal });
    await closeListeners(listeners);
    await containers.finishReleases();
    health.stop();
    await swarm.close().catch((err) => log.warn('closing the swarm failed', { err }));
    await runtime.close();
    await network.shutdown().catch((err) => log.warn('network shutdown failed', { err }));
    registry.close();
    db.close();
    rmSync(config.pidfile as string, { force: true });
    log.info('berthd stopped');
  };
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.once(sig, () => {
      shutdown(sig).then(
        () => process.exit(0),
        (err) => {
          log.error('shutdown failed', { err });
          process.exit(1);
        },
      );
    });
  }
}

main().catch((err) => {
  log.error('fatal', { err: err instanceof Error ? err.stack : String(err) });
  process.exit(1);
});
