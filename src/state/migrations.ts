/**
 * Ordered schema migrations. Never edit a released entry: append a new one.
 * user_version holds how many have been applied.
 */
export const MIGRATIONS: string[] = [
  // 1: images and layers
  `
  CREATE TABLE layers (
    chain_id TEXT PRIMARY KEY,
    diff_id TEXT NOT NULL,
    parent TEXT,
    size INTEGER NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE images (
    id TEXT PRIMARY KEY,              -- sha256 of the config blob
    config TEXT NOT NULL,             -- the config JSON, exactly as stored in the blob
    chain_ids TEXT NOT NULL,          -- JSON array, base layer first
    layer_blobs TEXT NOT NULL,        -- JSON array of compressed layer descriptors (for push/save), may be []
    parent TEXT NOT NULL DEFAULT '',  -- local parent image (commit/build)
    size INTEGER NOT NULL,
    created TEXT NOT NULL,
    added_at INTEGER NOT NULL
  );
  CREATE TABLE image_refs (
    ref TEXT PRIMARY KEY,             -- full name with :tag or @digest
    image_id TEXT NOT NULL REFERENCES images(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('tag','digest')),
    created_at INTEGER NOT NULL
  );
  CREATE INDEX image_refs_image ON image_refs(image_id);
  `,
  // 2: containers (the record is one JSON document; name is unique)
  `
  CREATE TABLE containers (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  `,
  // 3: networks, their endpoints (one per container and network, holding the IP allocation) and published ports
  `
  CREATE TABLE networks (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,               -- the network record as JSON
    created_at INTEGER NOT NULL
  );
  CREATE TABLE network_endpoints (
    container_id TEXT NOT NULL,
    network_id TEXT NOT NULL REFERENCES networks(id),
    ipv4 TEXT NOT NULL,               -- '' when the network has no IPv4 subnet
    ipv6 TEXT NOT NULL DEFAULT '',
    data TEXT NOT NULL,               -- endpoint details as JSON (mac, aliases, device names, netns path)
    created_at INTEGER NOT NULL,
    PRIMARY KEY (container_id, network_id)
  );
  CREATE UNIQUE INDEX network_endpoints_ipv4 ON network_endpoints(network_id, ipv4) WHERE ipv4 != '';
  CREATE UNIQUE INDEX network_endpoints_ipv6 ON network_endpoints(network_id, ipv6) WHERE ipv6 != '';
  CREATE TABLE network_ports (
    protocol TEXT NOT NULL,
    host_ip TEXT NOT NULL,
    host_port INTEGER NOT NULL,
    container_id TEXT NOT NULL,
    container_ip TEXT NOT NULL,       -- where the port is forwarded to
    container_port INTEGER NOT NULL,
    PRIMARY KEY (protocol, host_ip, host_port)
  );
  CREATE INDEX network_ports_container ON network_ports(container_id);
  `,
  // 4: swarm mode on one node: the cluster (with this node), services and their tasks, as JSON documents
  `
  CREATE TABLE swarm_cluster (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    data TEXT NOT NULL
  );
  CREATE TABLE swarm_services (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE swarm_tasks (
    id TEXT PRIMARY KEY,
    service_id TEXT NOT NULL,        -- no foreign key: a removed service's tasks go once their containers are gone
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE INDEX swarm_tasks_service ON swarm_tasks(service_id);
  `,
  // 5: volumes (issue 17): one JSON document per named or anonymous volume of the local driver
  `
  CREATE TABLE volumes (
    name TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  `,
  // 6: the classic builder's cache (docker build): step key → the image that step made
  `
  CREATE TABLE build_cache (
    key TEXT PRIMARY KEY,            -- sha256 of parent image, instruction with expanded args, file checksums
    image_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_used INTEGER NOT NULL
  );
  CREATE INDEX build_cache_image ON build_cache(image_id);
  `,
  // 7: image transfer (push, save, load): the compressed blob kept for a layer Berth made itself
  // (commit, build, import, load), by diff id, so it is compressed once and pushed as the same bytes
  `
  CREATE TABLE layer_blobs (
    diff_id TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL
  );
  `,
  // 8: crash safety and swarm secrets/configs: intents of container operations that change a
  // container's state for a moment (finished or undone after a crash), and the swarm's secrets and configs
  `
  CREATE TABLE container_intents (
    id TEXT PRIMARY KEY,
    container_id TEXT NOT NULL,
    kind TEXT NOT NULL,               -- commit-pause, exec, restart, remove
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE swarm_secrets (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE swarm_configs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  `,
  // 9: a cluster's names are unique in etcd (its name keys), and these tables are that cluster's
  // cache: a record etcd delivers must always fit, even two of one name left by an older berthd.
  // SQLite drops a UNIQUE constraint only by rebuilding the table.
  ['services', 'secrets', 'configs'].map((kind) => `
  CREATE TABLE swarm_${kind}_new (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  INSERT INTO swarm_${kind}_new(id, name, data, created_at) SELECT id, name, data, created_at FROM swarm_${kind};
  DROP TABLE swarm_${kind};
  ALTER TABLE swarm_${kind}_new RENAME TO swarm_${kind};
  CREATE INDEX swarm_${kind}_name ON swarm_${kind}(name);
  `).join(''),
];
