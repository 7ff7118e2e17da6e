/** Identifiers and secrets in swarmkit's formats: what clients display and sometimes parse. */
import { randomBytes } from 'node:crypto';

/** 128 random bits as 25 base-36 digits, the shape of every swarm object id. */
export function newSwarmId(): string {
  return BigInt(`0x${randomBytes(16).toString('hex')}`).toString(36).padStart(25, '0');
}

/**
 * `SWMTKN-1-<50 base-36 digits>-<25 base-36 digits>`: the CA digest part (the cluster CA's, or random
 * without one) is shared by both tokens.
 */
export function newJoinTokens(caDigest?: string): { worker: string; manager: string } {
  const ca = caDigest ?? BigInt(`0x${randomBytes(32).toString('hex')}`).toString(36).padStart(50, '0').slice(0, 50);
  return { worker: joinToken(ca), manager: joinToken(ca) };
}

export function joinToken(caPart: string): string {
  return `SWMTKN-1-${caPart}-${newSwarmId()}`;
}

/** The CA part of an existing token, so a rotation keeps it. */
export function tokenCaPart(token: string): string {
  return token.split('-')[2] ?? '';
}

/** `SWMKEY-1-<base64 of 32 random bytes>`. */
export function newUnlockKey(): string {
  return `SWMKEY-1-${randomBytes(32).toString('base64').replace(/=+$/, '')}`;
}
