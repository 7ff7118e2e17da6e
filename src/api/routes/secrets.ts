/** /secrets/... and /configs/...: the swarm's secrets and configs (create, list, inspect, update, remove). */
import type { Router } from '../router.js';
import { readJson, sendJson } from '../request.js';
import { matchLabels, parseFilters } from '../filters.js';
import type { SwarmService } from '../../engine/swarm/swarm.js';
import type { BlobKind, BlobRecord } from '../../engine/swarm/secrets.js';
import { objectVersion, sendEmpty } from './swarm-request.js';

export function secretRoutes(r: Router, swarm: SwarmService): void {
  for (const kind of ['secret', 'config'] as const) {
    const base = `/${kind}s`;
    r.on('POST', `${base}/create`, async (ctx) => {
      const rec = await swarm.createBlob(kind, await readJson(ctx));
      sendJson(ctx, 201, { ID: rec.id });
    });
    r.on('GET', base, async (ctx) => {
      const f = parseFilters(ctx.query.get('filters'), ['id', 'label', 'name', 'names']);
      const any = (key: string, pred: (v: string) => boolean) => !f.get(key)?.length || f.get(key)!.some(pred);
      const list = (await swarm.blobList(kind)).filter(
        (b) =>
          any('id', (v) => b.id.startsWith(v)) &&
          any('name', (v) => b.spec.Name.startsWith(v)) &&
          any('names', (v) => b.spec.Name === v) &&
          matchLabels(f.get('label'), b.spec.Labels),
      );
      sendJson(ctx, 200, list.map((b) => blobJson(kind, b)));
    });
    r.on('GET', `${base}/:id`, async (ctx) => sendJson(ctx, 200, blobJson(kind, await swarm.blob(kind, ctx.params.id!))));
    r.on('POST', `${base}/:id/update`, async (ctx) => {
      const version = objectVersion(ctx, kind);
      await swarm.updateBlob(kind, ctx.params.id!, version, await readJson(ctx));
      sendEmpty(ctx);
    });
    r.on('DELETE', `${base}/:id`, async (ctx) => {
      await swarm.removeBlob(kind, ctx.params.id!);
      ctx.res.writeHead(204);
      ctx.res.end();
    });
  }
}

/** A secret never shows its data again; a config does. */
function blobJson(kind: BlobKind, b: BlobRecord): Record<string, unknown> {
  const { Data, ...rest } = b.spec;
  return {
    ID: b.id,
    Version: { Index: b.version },
    CreatedAt: b.createdAt,
    UpdatedAt: b.updatedAt,
    Spec: kind === 'config' ? { ...rest, Data } : rest,
  };
}
