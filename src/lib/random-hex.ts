import { randomBytes } from 'node:crypto';

/** `bytes` random bytes as lower-case hex (2 × bytes characters): ids, and names no one else picks. */
export const randomHex = (bytes: number): string => randomBytes(bytes).toString('hex');
