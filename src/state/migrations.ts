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
];
