/**
 * The container a task runs in: an ordinary container named `<service>.<slot>.<task id>`, made from the
 * task's ContainerSpec the way dockerd's swarm executor makes it, with the swarm's system labels.
 */
import type { CreateRequest } from '../containers/container-service.js';
import type { CreateConfig, HostConfig, MountSpec } from '../containers/container-model.js';
import { stopGraceSeconds } from './service-spec.js';
import type { TaskContainerNetworks } from './overlay-networks.js';
import { TASK_LABELS, taskContainerName, type PortConfig, type TaskRecord } from './swarm-model.js';

export interface TemplateContext {
  nodeHostname: string;
  serviceLabels: Record<string, string>;
  /** Bind mounts of the task's secret and config files. */
  files?: MountSpec[];
  /** The task's overlay networks and addresses. */
  networks?: TaskContainerNetworks;
}

export function taskContainerRequest(t: TaskRecord, ports: PortConfig[], ctx: TemplateContext): CreateRequest {
  const cs = t.spec.ContainerSpec ?? {};
  const expand = (s: string) => expandTemplate(s, t, ctx);
  const name = taskContainerName(t);
  const labels: Record<string, string> = {
    ...(cs.Labels ?? {}),
    [TASK_LABELS.task]: '',
    [TASK_LABELS.taskId]: t.id,
    [TASK_LABELS.taskName]: name,
    [TASK_LABELS.nodeId]: t.nodeId,
    [TASK_LABELS.serviceId]: t.serviceId,
    [TASK_LABELS.serviceName]: t.serviceName,
  };
  const exposed: Record<string, object> = {};
  const bindings: Record<string, { HostIp: string; HostPort: string }[]> = {};
  for (const p of ports) {
    const key = `${p.TargetPort}/${p.Protocol ?? 'tcp'}`;
    exposed[key] = {};
    // Ingress ports reach tasks through the swarm's own listener; host-mode ports are the container's.
    if (p.PublishMode === 'host') (bindings[key] ??= []).push({ HostIp: '', HostPort: p.PublishedPort ? String(p.PublishedPort) : '' });
  }
  const config: CreateConfig = {
    Image: cs.Image,
    Labels: labels,
    Env: (cs.Env ?? []).map(expand),
    Hostname: cs.Hostname ? expand(cs.Hostname) : undefined,
    WorkingDir: cs.Dir || undefined,
    User: cs.User || undefined,
    Tty: !!cs.TTY,
    OpenStdin: !!cs.OpenStdin,
    StopSignal: cs.StopSignal || undefined,
    StopTimeout: stopGraceSeconds(t.spec),
    Healthcheck: cs.HealthCheck ?? undefined,
    ...(cs.Command?.length ? { Entrypoint: cs.Command } : {}),
    ...(cs.Args?.length ? { Cmd: cs.Args } : {}),
    ...(Object.keys(exposed).length ? { ExposedPorts: exposed } : {}),
  };
  const mounts = [...((cs.Mounts as MountSpec[] | undefined)?.map((m) => ({ ...m, ...(m.Source ? { Source: expand(m.Source) } : {}) })) ?? []), ...(ctx.files ?? [])];
  const dns = cs.DNSConfig ?? {};
  const limits = t.spec.Resources?.Limits ?? {};
  const hostConfig: HostConfig = {
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    Mounts: mounts.length ? mounts : null,
    ReadonlyRootfs: !!cs.ReadOnly,
    ExtraHosts: (cs.Hosts ?? []).flatMap(hostsEntry),
    Dns: dns.Nameservers ?? null,
    DnsSearch: dns.Search ?? null,
    DnsOptions: dns.Options ?? null,
    CapAdd: cs.CapabilityAdd ?? null,
    CapDrop: cs.CapabilityDrop ?? null,
    Sysctls: cs.Sysctls ?? null,
    Ulimits: cs.Ulimits ?? null,
    Init: cs.Init ?? null,
    ...(cs.Groups?.length ? { GroupAdd: cs.Groups } : {}),
    ...(limits.NanoCPUs ? { NanoCpus: limits.NanoCPUs } : {}),
    ...(limits.MemoryBytes ? { Memory: limits.MemoryBytes } : {}),
    ...(limits.Pids ? { PidsLimit: limits.Pids } : {}),
    ...(t.spec.LogDriver?.Name ? { LogConfig: { Type: t.spec.LogDriver.Name, Config: t.spec.LogDriver.Options ?? {} } } : {}),
    ...(Object.keys(bindings).length ? { PortBindings: bindings } : {}),
    ...(ctx.networks ? { NetworkMode: ctx.networks.mode } : {}),
  };
  return { name, config, hostConfig, networkingConfig: ctx.networks?.endpoints ?? {} };
}

/** A hosts(5) line `IP name [aliases...]` as ExtraHosts entries `name:IP`. */
function hostsEntry(line: string): string[] {
  const [ip, ...names] = line.trim().split(/\s+/);
  return ip ? names.map((n) => `${n}:${ip}`) : [];
}

/**
 * The placeholders dockerd expands in Env, Hostname and mount sources: {{.Service.Name}},
 * {{.Service.ID}}, {{.Service.Labels}}, {{.Node.ID}}, {{.Node.Hostname}}, {{.Task.ID}},
 * {{.Task.Name}}, {{.Task.Slot}}. Anything else is left as written.
 */
export function expandTemplate(s: string, t: TaskRecord, ctx: TemplateContext): string {
  if (!s.includes('{{')) return s;
  const values: Record<string, string> = {
    'Service.Name': t.serviceName,
    'Service.ID': t.serviceId,
    'Service.Labels': `map[${Object.entries(ctx.serviceLabels).sort().map(([k, v]) => `${k}:${v}`).join(' ')}]`,
    'Node.ID': t.nodeId,
    'Node.Hostname': ctx.nodeHostname,
    'Task.ID': t.id,
    'Task.Name': taskContainerName(t),
    'Task.Slot': String(t.slot || t.nodeId),
  };
  return s.replace(/\{\{\s*\.([A-Za-z]+\.[A-Za-z]+)\s*\}\}/g, (whole, key: string) => values[key] ?? whole);
}
