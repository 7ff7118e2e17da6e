/**
 * Secrets and configs are sealed before they reach etcd: AES-256-GCM under the cluster's data key,
 * which init makes, joins hand over (inside the TLS session that the token's CA digest pinned) and
 * each node keeps in a 0600 file beside its certificates. etcd only ever holds the sealed form.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export interface Sealed {
  alg: 'aes-256-gcm';
  iv: string;
  tag: string;
  data: string;
}

export const newDataKey = (): Buffer => randomBytes(32);

export function seal(key: Buffer, doc: unknown): Sealed {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([c.update(JSON.stringify(doc), 'utf8'), c.final()]);
  return { alg: 'aes-256-gcm', iv: iv.toString('base64'), tag: c.getAuthTag().toString('base64'), data: data.toString('base64') };
}

export function unseal<T>(key: Buffer, s: Sealed): T {
  // The whole 16-byte tag, as seal() makes it: without a length node takes a tag cut to 4 bytes
  // too, whose check a forger passes in 2^32 tries.
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(s.iv, 'base64'), { authTagLength: 16 });
  d.setAuthTag(Buffer.from(s.tag, 'base64'));
  return JSON.parse(Buffer.concat([d.update(Buffer.from(s.data, 'base64')), d.final()]).toString('utf8')) as T;
}
