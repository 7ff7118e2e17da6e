/**
 * Daemon configuration: built-in defaults, then /etc/berth/daemon.json (or --config-file), then flags.
 * Flag names follow dockerd's where they mean the same thing.
 */
import { readFileSync, existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseTcpAddress } from './lib/tcp-address.js';

export interface DaemonConfig {
  hosts: string[];
  dataRoot: string;
  execRoot: string;
  configFile: string;
  pidfile: string;
  registryMirrors: string[];
  insecureRegistries: string[];
  defaultRuntime: 'crun' | 'runc';
  logLevel: string;
  logOpts: Record<string, string>;
  group: string;
  /** Names Berth's bridges, nftables table and state ([a-z][a-z0-9]{0,7}); lets several daemons share a host. */
  networkPrefix: string;
  /** Serve tcp:// hosts over TLS (implied by tlsVerify). */
  tls: boolean;
  /** Serve tcp:// hosts over TLS and admit only clients with a certificate signed by tlsCaCert. */
  tlsVerify: boolean;
  tlsCaCert: string;
  tlsCert: string;
  tlsKey: string;
  /** Accept tcp:// hosts without client certificate verification (anyone who connects is root). */
  allowOpenTcp: boolean;
  /** An existing etcd cluster for swarm state (client URLs); empty: `swarm init` runs its own member. */
  swarmEtcdEndpoints: string[];
  /** PEM files for the external etcd: its CA and this node's client certificate and key. */
  swarmEtcdCaCert: string;
  swarmEtcdCert: string;
  swarmEtcdKey: string;
}

export const DEFAULT_CONFIG: DaemonConfig = {
  hosts: ['unix:///run/berth/berth.sock'],
  dataRoot: '/var/lib/berth',
  execRoot: '/run/berth',
  configFile: '/etc/berth/daemon.json',
  pidfile: '/run/berth/berthd.pid',
  registryMirrors: [],
  insecureRegistries: [],
  defaultRuntime: 'crun',
  logLevel: 'info',
  logOpts: {},
  group: 'docker',
  networkPrefix: 'berth',
  tls: false,
  tlsVerify: false,
  tlsCaCert: '/etc/berth/tls/ca.pem',
  tlsCert: '/etc/berth/tls/cert.pem',
  tlsKey: '/etc/berth/tls/key.pem',
  allowOpenTcp: false,
  swarmEtcdEndpoints: [],
  swarmEtcdCaCert: '',
  swarmEtcdCert: '',
  swarmEtcdKey: '',
};

const USAGE = `Usage: berthd [OPTIONS]

A Docker Engine API compatible container engine.

Options:
  -H, --host list                 Daemon socket(s) to listen on (default unix:///run/berth/berth.sock)
      --data-root string          Root of persistent state (default /var/lib/berth)
      --exec-root string          Root of runtime state: sockets, runtime dirs (default /run/berth)
      --config-file string        Daemon configuration file (default /etc/berth/daemon.json)
      --pidfile string            Path of the daemon's PID file (default /run/berth/berthd.pid)
      --registry-mirror list      Preferred registry mirror for docker.io pulls
      --insecure-registry list    Registries (host[:port] or CIDR) reached over plain HTTP / unverified TLS
      --default-runtime string    OCI runtime for containers: crun or runc (default crun)
      --log-level string          debug, info, warn, error, fatal (default info)
      --log-opt list              Default container log options (max-size=10m, max-file=3)
      --group string              Group owning the unix socket (name or GID; default docker, if it exists)
      --tls                       Serve tcp:// hosts over TLS (implied by --tlsverify)
      --tlsverify                 Serve tcp:// hosts over TLS; admit only client certificates signed by --tlscacert
      --tlscacert string          CA for client certificates (default /etc/berth/tls/ca.pem)
      --tlscert string            Server certificate for tcp:// hosts (default /etc/berth/tls/cert.pem)
      --tlskey string             Server key for tcp:// hosts (default /etc/berth/tls/key.pem)
      --network-prefix string     Prefix of Berth's bridges and firewall table (default berth)
      --allow-open-tcp            Allow tcp:// hosts without --tlsverify: whoever connects controls this host
      --swarm-etcd-endpoint list  Keep swarm state in this existing etcd (https://host:port) instead of one berthd runs
      --swarm-etcd-cacert string  CA of the external etcd
      --swarm-etcd-cert string    Client certificate for the external etcd
      --swarm-etcd-key string     Client key for the external etcd
  -h, --help                      Print usage
  -v, --version                   Print version

Environment:
  BERTH_CERTS_D                   Root of per-registry TLS files, <host[:port]>/{*.crt,*.cert,*.key}
                                  (default /etc/berth/certs.d)
`;

/** daemon.json keys, as in dockerd's file. Unknown keys are rejected so typos do not pass silently. */
const FILE_KEYS: Record<string, keyof DaemonConfig> = {
  hosts: 'hosts',
  'data-root': 'dataRoot',
  'exec-root': 'execRoot',
  pidfile: 'pidfile',
  'registry-mirrors': 'registryMirrors',
  'insecure-registries': 'insecureRegistries',
  'default-runtime': 'defaultRuntime',
  'log-level': 'logLevel',
  'log-opts': 'logOpts',
  group: 'group',
  'network-prefix': 'networkPrefix',
  tls: 'tls',
  tlsverify: 'tlsVerify',
  tlscacert: 'tlsCaCert',
  tlscert: 'tlsCert',
  tlskey: 'tlsKey',
  'allow-open-tcp': 'allowOpenTcp',
  'swarm-etcd-endpoints': 'swarmEtcdEndpoints',
  'swarm-etcd-cacert': 'swarmEtcdCaCert',
  'swarm-etcd-cert': 'swarmEtcdCert',
  'swarm-etcd-key': 'swarmEtcdKey',
};

/** Boolean flags that, as in dockerd, also take `--flag=true` / `--flag=false`. */
const BOOL_FLAGS = { tls: 'tls', tlsverify: 'tlsVerify', 'allow-open-tcp': 'allowOpenTcp' } as const;

/** Pulls `--flag=true|false` for BOOL_FLAGS out of argv (parseArgs refuses values on booleans). */
function splitBoolAssignments(argv: string[]): { args: string[]; explicit: Map<keyof typeof BOOL_FLAGS, boolean> } {
  const explicit = new Map<keyof typeof BOOL_FLAGS, boolean>();
  const args: string[] = [];
  for (const arg of argv) {
    const m = /^--([a-z-]+)=(.*)$/.exec(arg);
    if (m && m[1]! in BOOL_FLAGS) {
      const v = m[2]!.toLowerCase();
      if (v !== 'true' && v !== 'false' && v !== '1' && v !== '0') throw new ConfigError(`invalid boolean value ${JSON.stringify(m[2])} for --${m[1]}`);
      explicit.set(m[1] as keyof typeof BOOL_FLAGS, v === 'true' || v === '1');
    } else {
      args.push(arg);
    }
  }
  return { args, explicit };
}

export class ConfigError extends Error {}

export function loadConfig(argv: string[]): DaemonConfig | 'help' | 'version' {
  const { args, explicit } = splitBoolAssignments(argv);
  const { values } = parseArgs({
    args,
    allowPositionals: false,
    options: {
      host: { type: 'string', short: 'H', multiple: true },
      'data-root': { type: 'string' },
      'exec-root': { type: 'string' },
      'config-file': { type: 'string' },
      pidfile: { type: 'string' },
      'registry-mirror': { type: 'string', multiple: true },
      'insecure-registry': { type: 'string', multiple: true },
      'default-runtime': { type: 'string' },
      'log-level': { type: 'string', short: 'l' },
      'log-opt': { type: 'string', multiple: true },
      group: { type: 'string', short: 'G' },
      'network-prefix': { type: 'string' },
      tls: { type: 'boolean' },
      tlsverify: { type: 'boolean' },
      tlscacert: { type: 'string' },
      tlscert: { type: 'string' },
      tlskey: { type: 'string' },
      'allow-open-tcp': { type: 'boolean' },
      'swarm-etcd-endpoint': { type: 'string', multiple: true },
      'swarm-etcd-cacert': { type: 'string' },
      'swarm-etcd-cert': { type: 'string' },
      'swarm-etcd-key': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
  if (values.help) return 'help';
  if (values.version) return 'version';

  const cfg: DaemonConfig = structuredClone(DEFAULT_CONFIG);
  const explicitFile = values['config-file'];
  cfg.configFile = explicitFile ?? cfg.configFile;
  if (existsSync(cfg.configFile)) {
    applyFile(cfg, cfg.configFile);
  } else if (explicitFile) {
    throw new ConfigError(`unable to configure the daemon: open ${explicitFile}: no such file or directory`);
  }

  if (values.host?.length) cfg.hosts = values.host;
  if (values['data-root']) cfg.dataRoot = values['data-root'];
  if (values['exec-root']) cfg.execRoot = values['exec-root'];
  if (values.pidfile) cfg.pidfile = values.pidfile;
  if (values['registry-mirror']?.length) cfg.registryMirrors = values['registry-mirror'];
  if (values['insecure-registry']?.length) cfg.insecureRegistries = values['insecure-registry'];
  if (values['default-runtime']) cfg.defaultRuntime = values['default-runtime'] as DaemonConfig['defaultRuntime'];
  if (values['log-level']) cfg.logLevel = values['log-level'];
  if (values.group !== undefined) cfg.group = values.group;
  if (values['network-prefix'] !== undefined) cfg.networkPrefix = values['network-prefix'];
  for (const [flag, field] of Object.entries(BOOL_FLAGS) as Array<[keyof typeof BOOL_FLAGS, (typeof BOOL_FLAGS)[keyof typeof BOOL_FLAGS]]>) {
    const v = explicit.get(flag) ?? values[flag];
    if (v !== undefined) cfg[field] = v;
  }
  if (values.tlscacert) cfg.tlsCaCert = values.tlscacert;
  if (values.tlscert) cfg.tlsCert = values.tlscert;
  if (values.tlskey) cfg.tlsKey = values.tlskey;
  if (values['swarm-etcd-endpoint']?.length) cfg.swarmEtcdEndpoints = values['swarm-etcd-endpoint'];
  if (values['swarm-etcd-cacert']) cfg.swarmEtcdCaCert = values['swarm-etcd-cacert'];
  if (values['swarm-etcd-cert']) cfg.swarmEtcdCert = values['swarm-etcd-cert'];
  if (values['swarm-etcd-key']) cfg.swarmEtcdKey = values['swarm-etcd-key'];
  for (const opt of values['log-opt'] ?? []) {
    const eq = opt.indexOf('=');
    if (eq <= 0) throw new ConfigError(`invalid log-opt: ${opt}`);
    cfg.logOpts[opt.slice(0, eq)] = opt.slice(eq + 1);
  }
  validate(cfg);
  return cfg;
}

function applyFile(cfg: DaemonConfig, path: string): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(`unable to configure the daemon with file ${path}: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError(`unable to configure the daemon with file ${path}: not a JSON object`);
  }
  const target = cfg as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(parsed)) {
    const field = FILE_KEYS[key];
    if (!field) throw new ConfigError(`unable to configure the daemon with file ${path}: the following directives don't match any configuration option: ${key}`);
    target[field] = value;
  }
}

function validate(cfg: DaemonConfig): void {
  const isStrings = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string');
  if (!isStrings(cfg.hosts) || cfg.hosts.length === 0) throw new ConfigError('hosts must be a list of addresses');
  if (!isStrings(cfg.registryMirrors)) throw new ConfigError('registry-mirrors must be a list of URLs');
  if (!isStrings(cfg.insecureRegistries)) throw new ConfigError('insecure-registries must be a list');
  if (!isStrings(cfg.swarmEtcdEndpoints)) throw new ConfigError('swarm-etcd-endpoints must be a list of URLs');
  if (cfg.swarmEtcdEndpoints.length && (!cfg.swarmEtcdCaCert || !cfg.swarmEtcdCert || !cfg.swarmEtcdKey)) {
    throw new ConfigError('swarm-etcd-endpoints needs swarm-etcd-cacert, swarm-etcd-cert and swarm-etcd-key');
  }
  if (cfg.defaultRuntime !== 'crun' && cfg.defaultRuntime !== 'runc') {
    throw new ConfigError(`default-runtime must be crun or runc, not ${JSON.stringify(cfg.defaultRuntime)}`);
  }
  for (const k of ['tls', 'tlsVerify', 'allowOpenTcp'] as const) {
    if (typeof cfg[k] !== 'boolean') throw new ConfigError(`${k.toLowerCase()} must be true or false`);
  }
  for (const k of ['tlsCaCert', 'tlsCert', 'tlsKey', 'group'] as const) {
    if (typeof cfg[k] !== 'string') throw new ConfigError(`${k.toLowerCase()} must be a string`);
  }
  // As in dockerd, verifying clients implies serving TLS.
  if (cfg.tlsVerify) cfg.tls = true;
  for (const h of cfg.hosts) {
    if (!h.startsWith('unix://') && !h.startsWith('tcp://') && !h.startsWith('/')) {
      throw new ConfigError(`invalid host address ${JSON.stringify(h)}: use unix:///path or tcp://host:port`);
    }
    if (!h.startsWith('tcp://')) continue;
    try {
      parseTcpAddress(h, cfg.tls);
    } catch (err) {
      throw new ConfigError((err as Error).message);
    }
    // The API is root on this host: an unauthenticated TCP socket must be asked for by name.
    if (!cfg.tlsVerify && !cfg.allowOpenTcp) {
      throw new ConfigError(
        `refusing to listen on ${h} without --tlsverify: anyone who can connect to it controls this host as root. ` +
          'Use --tlsverify with --tlscacert, --tlscert and --tlskey, or pass --allow-open-tcp to accept an open socket',
      );
    }
  }
  for (const k of ['dataRoot', 'execRoot', 'pidfile'] as const) {
    if (typeof cfg[k] !== 'string' || !cfg[k].startsWith('/')) throw new ConfigError(`${k} must be an absolute path`);
  }
}

export { USAGE };
