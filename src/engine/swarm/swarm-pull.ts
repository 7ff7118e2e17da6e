/** Pulls for task images: one pull per image at a time, however many tasks wait for it. */
import { decodeRegistryAuth } from '../../registry/auth-config.js';
import { parseReference, type Reference } from '../../registry/reference.js';
import type { AuthConfig } from '../../registry/auth-config.js';
import type { PullFn } from './task-runner.js';

export type EnginePull = (ref: Reference, opts: { auth?: AuthConfig }, progress: () => void) => Promise<unknown>;

export function taskImagePuller(pull: EnginePull): PullFn {
  const inFlight = new Map<string, Promise<void>>();
  return (image, registryAuth) => {
    const running = inFlight.get(image);
    if (running) return running;
    const p = (async () => {
      await pull(parseReference(image), { auth: decodeRegistryAuth(registryAuth) }, () => undefined);
    })().finally(() => inFlight.delete(image));
    inFlight.set(image, p);
    return p;
  };
}
