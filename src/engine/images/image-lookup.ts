/**
 * Finds an image the way dockerd does: a full or short id (with or without `sha256:`), a tag
 * (`busybox` means `busybox:latest`) or a digest reference.
 */
import { notFound, invalidArgument } from '../../lib/errors.js';
import type { ImageRecord, ImageRecords } from '../../state/image-records.js';
import { familiarString, fullName, fullString, parseReference, tryParseReference, type Reference } from '../../registry/reference.js';

const HEX_PREFIX = /^[a-f0-9]{1,64}$/;

export interface FoundImage {
  image: ImageRecord;
  /** The reference the caller named, when it was a name rather than an id. */
  ref?: Reference;
}

/** Like tryLookupImage, but a miss is not-found and a string that is neither id nor name is invalid. */
export function lookupImage(records: ImageRecords, nameOrId: string): FoundImage {
  const found = tryLookupImage(records, nameOrId);
  if (found) return found;
  // dockerd parses the name first: `UPPER` or `a@@b` is a 400 with the parser's message, not a 404.
  if (!/^(sha256:)?[a-f0-9]{64}$/.test(nameOrId.trim())) parseReference(nameOrId.trim());
  throw notFound(`No such image: ${displayName(nameOrId)}`);
}

export function tryLookupImage(records: ImageRecords, nameOrId: string): FoundImage | undefined {
  const s = nameOrId.trim();
  if (s.startsWith('sha256:')) {
    // Not an id prefix: dockerd reads it as repository `sha256` with a tag, which names nothing here.
    const hex = s.slice(7);
    if (!HEX_PREFIX.test(hex)) return undefined;
    const image = byIdPrefix(records, hex, s);
    return image && { image };
  }
  if (/^[a-f0-9]{64}$/.test(s)) {
    const image = records.getImage(`sha256:${s}`);
    return image && { image };
  }
  const ref = tryParseReference(s);
  if (ref) {
    const r = records.getRef(refKey(ref));
    if (r) {
      const image = records.getImage(r.imageId);
      if (image) return { image, ref };
    }
  }
  if (HEX_PREFIX.test(s)) {
    const image = byIdPrefix(records, s, s);
    if (image) return { image };
  }
  return undefined;
}

function byIdPrefix(records: ImageRecords, hex: string, shown: string): ImageRecord | undefined {
  const ids = records.imageIdsWithPrefix(hex);
  if (ids.length > 1) throw invalidArgument(`multiple IDs found with provided prefix: ${shown}`);
  return ids.length === 1 ? records.getImage(ids[0]!) : undefined;
}

/**
 * `busybox` → `busybox:latest` for messages, as dockerd prints them. Only a full id or a `sha256:`
 * prefix stays as given: a short hex string is also a valid name, and dockerd reports it as one.
 */
export function displayName(nameOrId: string): string {
  if (/^(sha256:)?[a-f0-9]{64}$/.test(nameOrId) || nameOrId.startsWith('sha256:')) return nameOrId;
  const ref = tryParseReference(nameOrId);
  return ref ? familiarString(ref) : nameOrId;
}

/** The key an image reference is stored under: the digest wins over a tag. */
export function refKey(ref: Reference): string {
  return ref.digest ? `${fullName(ref)}@${ref.digest}` : fullString(ref);
}
