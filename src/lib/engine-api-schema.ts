/**
 * The Engine API's request schema, generated from the spec by scripts/gen-api-schema.mjs into
 * generated/engine-api-schema.json (berthd never reads the YAML). It says only what dockerd's Go decoder
 * refuses: wrong JSON types, integers out of their Go type's range, unknown enum values. Unknown
 * fields are ignored and null is taken wherever Go takes it; `goStruct` matches a struct's keys in
 * any case and leaves a null field unset, `goNull` makes a null element of a list or map its zero
 * value ("" / 0 / {}), as Go's decoder does, and `goStrSlice` turns
 * a string given for a StrSlice (Cmd, Entrypoint, CapAdd...) into a list, so code reading a checked
 * value never meets a shape dockerd's decoded structs would not have.
 *
 * Used by api/ to check requests and by engine/ to repair records stored before requests were checked.
 */
import { createRequire } from 'node:module';
import type { Ajv as AjvType, AnySchemaObject, FuncKeywordDefinition, ValidateFunction } from 'ajv';
import spec from '../../generated/engine-api-schema.json' with { type: 'json' };

export interface QueryCheck {
  type: string;
  goType?: string;
  minimum?: number;
  maximum?: number;
  enum?: string[];
}

export interface OperationSpec {
  query?: Record<string, QueryCheck>;
  body?: object;
}

/** By "METHOD /path/{}/template" (every path parameter written `{}`). */
export const OPERATIONS = spec.operations as Record<string, OperationSpec>;

const DEFINITIONS_ID = 'engine-api-definitions.json';

let ajv: AjvType | undefined;

function compiler(): AjvType {
  if (ajv) return ajv;
  // Loaded on first use (~50 ms here), not at start-up: only requests with a body or typed query need it.
  const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv');
  // strict off: the schema is generated and carries annotations (goType) ajv need not know.
  // inlineRefs and code optimisation off: compiling the create body takes about half as long, checking as fast.
  ajv = new Ajv({ strict: false, allErrors: false, verbose: true, validateSchema: false, validateFormats: false, inlineRefs: false, code: { optimize: false } });
  ajv.addKeyword({ keyword: 'goType', schemaType: 'string' });
  ajv.addKeyword({ keyword: 'goNull', schemaType: 'string', modifying: true, errors: false, validate: normaliseNulls });
  // Before `properties`, so that the fields it renames are checked under their own names.
  ajv.addKeyword({ keyword: 'goStruct', type: 'object', schemaType: 'boolean', modifying: true, errors: false, before: 'properties', compile: goStruct });
  ajv.addKeyword({ keyword: 'goStrSlice', schemaType: 'boolean', modifying: true, errors: false, validate: strSliceOfString });
  ajv.addSchema({ $id: DEFINITIONS_ID, definitions: spec.definitions });
  return ajv;
}

/** Compiles a schema whose `#/definitions/X` refs name the spec's definitions (compiled once for all). */
export function compileApiSchema(schema: object): ValidateFunction {
  const text = JSON.stringify(schema).replaceAll('"#/definitions/', `"${DEFINITIONS_ID}#/definitions/`);
  return compiler().compile(JSON.parse(text) as object);
}

/** What Go's decoder makes of a null element of a list or map: the element type's zero value. */
function normaliseNulls(kind: string, data: unknown): boolean {
  if (data === null || typeof data !== 'object') return true;
  if (Array.isArray(data)) {
    for (let i = 0; i < data.length; i++) if (data[i] === null) data[i] = zeroOf(kind);
    return true;
  }
  const obj = data as Record<string, unknown>;
  for (const k in obj) if (obj[k] === null) obj[k] = zeroOf(kind);
  return true;
}

/**
 * A Go struct as its decoder reads it: a key names a field exactly or, failing that, in any case
 * ("hostconfig" is HostConfig; of two keys for one field the later wins), and a null leaves the
 * field unset. Keys are renamed to the field's own name and nulls removed, in place.
 */
function goStruct(_schema: boolean, parentSchema: AnySchemaObject): ReturnType<NonNullable<FuncKeywordDefinition['compile']>> {
  const fields = new Set(Object.keys((parentSchema.properties as Record<string, unknown> | undefined) ?? {}));
  const byFold = new Map<string, string>();
  for (const f of fields) byFold.set(f.toLowerCase(), f);
  return (data: unknown) => {
    const obj = data as Record<string, unknown>;
    let winners: Map<string, string> | undefined;
    for (const k in obj) {
      if (fields.has(k)) {
        if (winners?.has(k)) winners.set(k, k);
        continue;
      }
      const field = byFold.get(k.toLowerCase());
      if (field !== undefined) (winners ??= new Map()).set(field, k);
    }
    if (winners) {
      for (const [field, from] of winners) {
        const value = obj[from];
        for (const k of Object.keys(obj)) if (k !== field && byFold.get(k.toLowerCase()) === field) delete obj[k];
        obj[field] = value;
      }
    }
    for (const k in obj) if (obj[k] === null) delete obj[k];
    return true;
  };
}

/** Go's StrSlice decoder takes "sh" as ["sh"]; so does the checked value, for code that reads it. */
function strSliceOfString(_schema: boolean, data: unknown, _parentSchema?: unknown, cxt?: { parentData: unknown; parentDataProperty: string | number }): boolean {
  if (typeof data === 'string' && cxt && cxt.parentData !== null && typeof cxt.parentData === 'object') {
    (cxt.parentData as Record<string | number, unknown>)[cxt.parentDataProperty] = [data];
  }
  return true;
}

function zeroOf(kind: string): unknown {
  switch (kind) {
    case 'string': return '';
    case 'integer': return 0;
    case 'boolean': return false;
    case 'array': return [];
    case 'object': return {};
    default: return null;
  }
}

const definitionValidators = new Map<string, ValidateFunction>();

/** Most fields one repair drops; a record needing more is left as it is after them. */
const MAX_REPAIRS = 200;

/**
 * Makes a stored value fit a definition (e.g. "HostConfig") by dropping each field that does not:
 * a record written before requests were checked reads as if the bad field had never been sent.
 * Returns the dropped fields' paths ("/NetworkMode"); mutates `value`.
 */
export function repairToDefinition(definition: string, value: unknown): string[] {
  let validate = definitionValidators.get(definition);
  if (!validate) {
    validate = compileApiSchema({ $ref: `#/definitions/${definition}` });
    definitionValidators.set(definition, validate);
  }
  const dropped: string[] = [];
  while (dropped.length < MAX_REPAIRS && !validate(value)) {
    const path = validate.errors?.[0]?.instancePath ?? '';
    if (path === '' || !dropAt(value, path)) break;
    dropped.push(path);
  }
  return dropped;
}

/** Removes the field or list element at a JSON pointer; false when there is nothing to remove. */
function dropAt(root: unknown, pointer: string): boolean {
  const parts = pointer.slice(1).split('/').map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  let node = root;
  for (const p of parts.slice(0, -1)) {
    if (node === null || typeof node !== 'object') return false;
    node = (node as Record<string, unknown>)[p];
  }
  const last = parts[parts.length - 1]!;
  if (Array.isArray(node)) {
    const i = Number(last);
    if (!Number.isInteger(i) || i < 0 || i >= node.length) return false;
    node.splice(i, 1);
    return true;
  }
  if (node === null || typeof node !== 'object' || !Object.hasOwn(node, last)) return false;
  delete (node as Record<string, unknown>)[last];
  return true;
}
