/** /networks/...: Docker's network objects over the engine's network service. */
import type { Router } from '../router.js';
import { readJsonObject, sendJson, queryBool, type RequestContext } from '../request.js';
import { parseFilters, matchLabels, parseUntil } from '../filters.js';
import { shownDriver, shownScope, type NetworkService, type EndpointRequest, type NetworkRecord, type NetworkCreateSpec } from '../../engine/networks/networks.js';
import { invalidArgument } from '../../lib/errors.js';

export function networkRoutes(r: Router, networks: NetworkService): void {
  r.on('GET', '/networks', (ctx) => listNetworks(ctx, networks));
  r.on('GET', '/networks/:id', (ctx) => sendJson(ctx, 200, networkJson(networks, networks.get(ctx.params.id!), true)));
  r.on('POST', '/networks/create', async (ctx) => {
    const body = await readJsonObject(ctx);
    const n = await networks.create(createSpec(body));
    sendJson(ctx, 201, { Id: n.id, Warning: '' });
  });
  r.on('DELETE', '/networks/:id', async (ctx) => {
    await networks.remove(ctx.params.id!);
    ctx.res.writeHead(204);
    ctx.res.end();
  });
  r.on('POST', '/networks/:id/connect', async (ctx) => {
    const body = await readJsonObject(ctx);
    if (typeof body.Container !== 'string' || !body.Container) throw invalidArgument('Container is required');
    await networks.connect(ctx.params.id!, body.Container, (body.EndpointConfig ?? {}) as EndpointRequest);
    sendJson(ctx, 200, {});
  });
  r.on('POST', '/networks/:id/disconnect', async (ctx) => {
    const body = await readJsonObject(ctx);
    if (typeof body.Container !== 'string' || !body.Container) throw invalidArgument('Container is required');
    await networks.disconnect(ctx.params.id!, body.Container, body.Force === true);
    sendJson(ctx, 200, {});
  });
  r.on('POST', '/networks/prune', async (ctx) => {
    const f = parseFilters(ctx.query.get('filters'), ['until', 'label', 'label!']);
    const until = f.get('until')?.[0];
    const untilMs = until ? parseUntil(until) : undefined;
    const removed = await networks.prune(
      (n) => !matchLabels(f.get('label'), n.labels) || (f.get('label!') ?? []).some((l) => matchLabels([l], n.labels)) || (untilMs !== undefined && Date.parse(n.created) >= untilMs),
    );
    sendJson(ctx, 200, { NetworksDeleted: removed });
  });
}

function str(v: unknown, what: string): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw invalidArgument(`invalid JSON: ${what} must be a string`);
  return v;
}

function createSpec(b: Record<string, unknown>): NetworkCreateSpec {
  const name = str(b.Name, 'Name');
  if (!name) throw invalidArgument('network name is required');
  const ipam = (b.IPAM ?? {}) as { Driver?: string; Config?: { Subnet?: string; Gateway?: string; IPRange?: string; AuxiliaryAddresses?: Record<string, string> }[] | null; Options?: Record<string, string> | null };
  if (typeof ipam !== 'object' || (ipam.Config && !Array.isArray(ipam.Config))) throw invalidArgument('invalid JSON: IPAM.Config must be a list');
  return {
    name,
    driver: str(b.Driver, 'Driver'),
    internal: b.Internal === true,
    attachable: b.Attachable === true,
    enableIPv6: b.EnableIPv6 === true,
    ipam: {
      driver: ipam.Driver || undefined,
      config: (ipam.Config ?? []).map((c) => ({ subnet: c.Subnet || undefined, gateway: c.Gateway || undefined, ipRange: c.IPRange || undefined, auxAddresses: c.AuxiliaryAddresses ?? undefined })),
      options: ipam.Options ?? undefined,
    },
    labels: (b.Labels ?? {}) as Record<string, string>,
    options: (b.Options ?? {}) as Record<string, string>,
    checkDuplicate: b.CheckDuplicate === true,
    ingress: b.Ingress === true,
    configOnly: b.ConfigOnly === true,
    configFrom: (b.ConfigFrom as { Network?: string } | undefined)?.Network || undefined,
    scope: str(b.Scope, 'Scope'),
  };
}

export function networkJson(networks: NetworkService, n: NetworkRecord, withContainers: boolean): Record<string, unknown> {
  const config: Record<string, unknown>[] = [];
  if (n.subnet) config.push({ Subnet: n.subnet, Gateway: n.gateway, ...(n.ipRange ? { IPRange: n.ipRange } : {}), ...(n.auxAddresses ? { AuxiliaryAddresses: n.auxAddresses } : {}) });
  if (n.subnet6) config.push({ Subnet: n.subnet6, Gateway: n.gateway6, ...(n.ipRange6 ? { IPRange: n.ipRange6 } : {}) });
  const containers: Record<string, unknown> = {};
  if (withContainers) {
    for (const e of networks.endpoints(n)) {
      containers[e.containerId] = {
        Name: e.containerName,
        EndpointID: e.endpointId,
        MacAddress: e.macAddress,
        IPv4Address: e.ipAddress ? `${e.ipAddress}/${e.ipPrefixLen}` : '',
        IPv6Address: e.ipv6Address ? `${e.ipv6Address}/${e.ipv6PrefixLen}` : '',
      };
    }
  }
  return {
    Name: n.name,
    Id: n.id,
    Created: n.created,
    Scope: shownScope(n),
    Driver: shownDriver(n),
    EnableIPv4: true,
    EnableIPv6: n.enableIPv6,
    IPAM: { Driver: 'default', Options: n.ipamOptions ?? {}, Config: config },
    Internal: n.internal,
    Attachable: n.attachable,
    Ingress: n.ingress === true,
    ConfigFrom: { Network: '' },
    ConfigOnly: false,
    Containers: containers,
    Options: n.options,
    Labels: n.labels,
    ...(withContainers && n.overlay ? { Peers: networks.peers(n) } : {}),
  };
}

const LIST_FILTERS = ['driver', 'id', 'label', 'name', 'scope', 'type', 'dangling'] as const;

function listNetworks(ctx: RequestContext, networks: NetworkService): void {
  const f = parseFilters(ctx.query.get('filters'), LIST_FILTERS);
  const any = (key: string, pred: (v: string) => boolean) => {
    const vs = f.get(key);
    return !vs?.length || vs.some(pred);
  };
  for (const t of f.get('type') ?? []) if (t !== 'custom' && t !== 'builtin') throw invalidArgument(`invalid filter: 'type'='${t}'`);
  const verbose = queryBool(ctx.query, 'verbose');
  const out = networks.list().filter((n) =>
    any('driver', (v) => v === shownDriver(n)) &&
    any('id', (v) => n.id.startsWith(v)) &&
    any('name', (v) => n.name.includes(v)) &&
    any('scope', (v) => v === shownScope(n)) &&
    any('type', (v) => (v === 'builtin') === n.predefined) &&
    any('dangling', (v) => (v === 'true' || v === '1') === (networks.endpoints(n).length === 0 && !n.predefined)) &&
    matchLabels(f.get('label'), n.labels),
  );
  sendJson(ctx, 200, out.map((n) => networkJson(networks, n, verbose)));
}
