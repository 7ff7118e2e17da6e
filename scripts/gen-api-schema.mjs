#!/usr/bin/env node
/**
 * Writes generated/engine-api-schema.json: for every operation of the Engine API spec that
 * takes a JSON body or a typed query parameter, what berthd checks before a handler runs. berthd
 * never reads the YAML at run time; run this after the spec in ../shared/reference changes:
 *
 *   node scripts/gen-api-schema.mjs [path/to/docker-engine-api-vX.Y.yaml [out.json]]
 *
 * The checks mirror what dockerd's Go decoder refuses, not everything the spec documents:
 * - types (number into string, string into bool, ...) and Go integer ranges from `format`;
 * - string enums ("" always allowed: Go's zero value means "default" throughout the API);
 * - nothing else: no `required` (dockerd's decoder does not check it), no spec minimum/maximum
 *   (dockerd takes MemorySwappiness -1 from the CLI although the spec says 0..100), no
 *   additionalProperties: false (unknown fields are ignored);
 * - null is accepted everywhere, as Go's decoder accepts it; `goNull` tells the validator what
 *   Go would make of a null element in a list or map (its zero value);
 * - `goStruct` marks a Go struct: its fields match keys case-insensitively, as Go's decoder matches
 *   them, and a null field is left unset.
 * Fields whose Go type has its own decoder get that decoder's shape (StrSlice: a string or a list;
 * `goStrSlice` has the validator turn a string into a one-element list, as that decoder does).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..');
// ../shared beside the repo (CI, main checkout) or beside the worktrees' parent.
const specPath = (process.argv[2] || undefined) ?? ['..', '../..'].map((up) => path.resolve(repo, up, 'shared/reference/docker-engine-api-v1.55.yaml')).find((p) => fs.existsSync(p));
if (!specPath) throw new Error('docker-engine-api-v1.55.yaml not found; pass its path');
const outPath = process.argv[3] ?? path.join(repo, 'generated/engine-api-schema.json');
const spec = parse(fs.readFileSync(specPath, 'utf8'));

/** Go's strslice.StrSlice: decodes from a JSON string or a list of strings. */
const STRSLICE = new Set(['ContainerConfig.Cmd', 'ContainerConfig.Entrypoint', 'ContainerConfig.Shell', 'HostConfig.CapAdd', 'HostConfig.CapDrop']);

/** Query parameters the spec calls integer but dockerd reads as timestamps (Unix with fraction, RFC 3339, durations). */
const TIMESTAMP_QUERY = new Set(['since', 'until']);

/**
 * Enums the spec lists for documentation whose values dockerd checks itself, after decoding, with its own
 * words: log driver names (Berth also takes podman's `k8s-file`, see docs/compat.md), the cgroup
 * namespace mode (`invalid cgroup namespace mode: x`).
 */
const OPEN_ENUMS = new Set(['HostConfig.LogConfig.Type', 'HostConfig.CgroupnsMode']);

/** Query parameters whose handler checks them with dockerd's own text (`invalid limit specified`). */
const OWN_CHECK_QUERY = new Set(['GET /images/search limit']);

/** Unsigned Go fields the spec gives no `format` for: dockerd's decoder refuses negative values there. */
const GO_FORMATS = { 'Resources.BlkioWeight': 'uint16', 'Resources.BlkioWeightDevice[].Weight': 'uint16', 'ThrottleDevice.Rate': 'uint64' };

const INT_RANGES = {
  int8: [-128, 127],
  int32: [-2147483648, 2147483647],
  int: [-9223372036854775808, 9223372036854775807],
  int64: [-9223372036854775808, 9223372036854775807],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
  uint64: [0, 18446744073709551615],
};

const usedDefs = new Set();

function refName(ref) {
  const m = /^#\/definitions\/(.+)$/.exec(ref);
  if (!m) throw new Error(`unexpected $ref ${ref}`);
  return m[1];
}

/** The JSON kind Go fills in for a null element of this schema ("" for strings, {} for structs, ...). */
function zeroKind(node, seen = 0) {
  if (!node || seen > 20) return undefined;
  if (node.$ref) return zeroKind(spec.definitions[refName(node.$ref)], seen + 1);
  if (node.allOf) {
    const kinds = node.allOf.map((n) => zeroKind(n, seen + 1));
    return kinds.includes('object') || kinds.every((k) => k === undefined) ? 'object' : kinds.find((k) => k !== undefined);
  }
  if (typeof node.type === 'string') return node.type === 'number' ? 'integer' : node.type;
  return undefined;
}

function goType(node, name) {
  if (!node) return 'interface {}';
  if (node.$ref) return refName(node.$ref);
  if (node.allOf) return name ?? 'struct';
  switch (node.type) {
    case 'string': return 'string';
    case 'boolean': return 'bool';
    case 'integer': return INT_RANGES[node.format] ? node.format : 'int64';
    case 'number': return 'float64';
    case 'array': return `[]${goType(node.items)}`;
    case 'object':
      if (node.properties) return name ?? 'struct';
      if (node.additionalProperties && typeof node.additionalProperties === 'object') return `map[string]${goType(node.additionalProperties)}`;
      return 'map[string]interface {}';
    default: return 'interface {}';
  }
}

/** One spec schema node → the JSON Schema the validator compiles. `where` is "Definition.Field" for overrides. */
function convert(node, where, name) {
  if (node === undefined || node === null || typeof node !== 'object') return {};
  if (GO_FORMATS[where] && node.format !== GO_FORMATS[where]) node = { ...node, format: GO_FORMATS[where] };
  if (node.$ref) {
    usedDefs.add(refName(node.$ref));
    return { $ref: `#/definitions/${refName(node.$ref)}` };
  }
  const out = {};
  if (node.allOf) {
    out.allOf = node.allOf.map((n) => convert(n, where, name));
    // A struct made of parts (HostConfig = Resources + its own fields), or one type described again.
    if (zeroKind(node) === 'object') {
      out.type = ['object', 'null'];
      out.goType = name ?? 'struct';
      out.goStruct = true;
    }
    return out;
  }
  if (STRSLICE.has(where)) {
    return { type: ['array', 'string', 'null'], items: { type: ['string', 'null'], goType: 'string' }, goType: 'strslice.StrSlice', goNull: 'string', goStrSlice: true };
  }
  if (typeof node.type === 'string') {
    out.type = [node.type, 'null'];
    out.goType = goType(node, name);
  }
  if (node.type === 'integer') Object.assign(out, intBounds(node.format));
  if (Array.isArray(node.enum) && node.enum.length && node.enum.every((v) => typeof v === 'string') && !OPEN_ENUMS.has(where)) {
    out.enum = [...new Set(['', ...node.enum])];
    out.enum.push(null);
  }
  if (node.properties) {
    out.properties = {};
    for (const [k, v] of Object.entries(node.properties)) out.properties[k] = convert(v, `${name ?? where}.${k}`, undefined);
    out.goStruct = true;
  }
  if (node.items) {
    out.items = convert(node.items, `${where}[]`, undefined);
    const z = zeroKind(node.items);
    if (z) out.goNull = z;
  }
  if (node.additionalProperties && typeof node.additionalProperties === 'object') {
    out.additionalProperties = convert(node.additionalProperties, `${where}{}`, undefined);
    const z = zeroKind(node.additionalProperties);
    if (z && !node.properties) out.goNull = z;
  }
  return out;
}

/**
 * The range of a Go integer type as JSON Schema bounds. 64-bit bounds are exclusive and one past the
 * limit: ±2^63 and 2^64 are exact doubles, but the limits themselves are not, and a value at them
 * would be written back (inspect) as e.g. -9223372036854776000, which Go clients cannot decode.
 */
function intBounds(format) {
  const [min, max] = INT_RANGES[format] ?? INT_RANGES.int64;
  const wide = max > Number.MAX_SAFE_INTEGER;
  const out = {};
  if (min === 0 || !wide) out.minimum = min;
  else out.exclusiveMinimum = min;
  if (wide) out.exclusiveMaximum = max;
  else out.maximum = max;
  return out;
}

function queryCheck(p) {
  if (p.type === 'integer' && !TIMESTAMP_QUERY.has(p.name)) {
    const [min, max] = INT_RANGES[p.format] ?? INT_RANGES.int64;
    return { type: 'integer', goType: INT_RANGES[p.format] ? p.format : 'int', minimum: min, maximum: max };
  }
  if (p.type === 'string' && Array.isArray(p.enum)) return { type: 'string', enum: [...new Set(['', ...p.enum])] };
  return undefined;
}

const operations = {};
for (const [route, item] of Object.entries(spec.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (!['get', 'head', 'post', 'put', 'delete'].includes(method)) continue;
    const entry = {};
    for (const p of [...(item.parameters ?? []), ...(op.parameters ?? [])]) {
      if (p.in === 'query') {
        const check = OWN_CHECK_QUERY.has(`${method.toUpperCase()} ${route} ${p.name}`) ? undefined : queryCheck(p);
        if (check) (entry.query ??= {})[p.name] = check;
      } else if (p.in === 'body') {
        const s = p.schema ?? {};
        const json = s.$ref || s.allOf || s.type === 'object' || s.type === 'array';
        if (json) entry.body = convert(s, op.operationId ?? route, s.title ?? (s.$ref ? undefined : op.operationId));
      }
    }
    if (entry.query || entry.body) operations[`${method.toUpperCase()} ${route.replace(/\{[^}]+\}/g, '{}')}`] = entry;
  }
}

// Definitions reachable from the operations, converted once each (new refs are found as we go).
const definitions = {};
for (let again = true; again; ) {
  again = false;
  for (const name of [...usedDefs]) {
    if (definitions[name]) continue;
    definitions[name] = convert(spec.definitions[name], name, name);
    again = true;
  }
}

const notice = [
  'Generated by scripts/gen-api-schema.mjs from the Docker Engine API specification',
  `(${path.basename(specPath)}, API ${spec.info.version}); do not edit by hand.`,
  'The specification is Copyright Docker, Inc. and the Moby project contributors, licensed under the',
  'Apache License, Version 2.0 (http://www.apache.org/licenses/LICENSE-2.0); this file is a derived',
  'work of it, changed to carry only the types, Go integer ranges and enums berthd checks requests against.',
];
const out = { '//': notice, apiVersion: spec.info.version, operations, definitions: Object.fromEntries(Object.entries(definitions).sort(([a], [b]) => a.localeCompare(b))) };
fs.mkdirSync(path.dirname(outPath), { recursive: true });
fs.writeFileSync(outPath, JSON.stringify(out, null, 1) + '\n');
console.log(`${path.relative(repo, outPath)}: ${Object.keys(operations).length} operations, ${Object.keys(definitions).length} definitions, ${fs.statSync(outPath).size} bytes`);
