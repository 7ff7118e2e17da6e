/** Service spec checks, defaults, published port assignment and what counts as a template change. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeServiceSpec, resolvePorts, templateChanged, withDefaults, restartPolicy, restartDelayMs, updateConfig } from '../../src/engine/swarm/service-spec.js';
import { expandTemplate, taskContainerRequest } from '../../src/engine/swarm/task-container.js';
import type { TaskRecord } from '../../src/engine/swarm/swarm-model.js';
import { BerthError } from '../../src/lib/errors.js';

const base = { Name: 'web', TaskTemplate: { ContainerSpec: { Image: 'busybox' } } };

describe('service specs', () => {
  it('fills the mode and refuses what swarmkit refuses', () => {
    assert.deepEqual(normalizeServiceSpec(base).Mode, { Replicated: { Replicas: 1 } });
    assert.deepEqual(normalizeServiceSpec({ ...base, Mode: { Replicated: {} } }).Mode, { Replicated: { Replicas: 1 } });
    assert.deepEqual(normalizeServiceSpec({ ...base, Mode: { Global: {} } }).Mode, { Global: {} });
    const bad = (spec: unknown, kind: string, msg: RegExp) =>
      assert.throws(() => normalizeServiceSpec(spec), (e: unknown) => e instanceof BerthError && e.kind === kind && msg.test(e.message));
    bad({ Name: 'x' }, 'invalid-argument', /missing runtime/);
    bad({ ...base, TaskTemplate: { ContainerSpec: { Image: ' ' } } }, 'invalid-argument', /image reference must be provided/);
    bad({ ...base, Name: '-web' }, 'invalid-argument', /valid as a DNS name component/);
    bad({ ...base, Mode: { Replicated: { Replicas: -1 } } }, 'invalid-argument', /Replicas/);
    bad({ ...base, Mode: { Replicated: {}, Global: {} } }, 'invalid-argument', /only one mode/);
    assert.equal(normalizeServiceSpec({ ...base, Name: 'my_web.v2' }).Name, 'my_web.v2');
    bad({ ...base, Name: '_web' }, 'invalid-argument', /valid as a DNS name component/);
    bad({ ...base, TaskTemplate: { ContainerSpec: { Image: 'b' }, RestartPolicy: { Condition: 'sometimes' } } }, 'invalid-argument', /RestartCondition/);
    bad({ ...base, UpdateConfig: { Order: 'random' } }, 'invalid-argument', /invalid order/);
    bad({ ...base, UpdateConfig: { MaxFailureRatio: 2 } }, 'invalid-argument', /between 0 and 1/);
    bad({ ...base, EndpointSpec: { Ports: [{ TargetPort: 80, PublishedPort: 8080 }, { TargetPort: 81, PublishedPort: 8080 }] } }, 'invalid-argument', /duplicate published ports/);
    bad({ ...base, EndpointSpec: { Mode: 'dnsrr', Ports: [{ TargetPort: 80 }] } }, 'invalid-argument', /dnsrr/);
  });

  it('backs off after tasks that never ran: the policy delay doubled, up to the cap', () => {
    const spec = (Delay: number) => normalizeServiceSpec({ ...base, TaskTemplate: { ContainerSpec: { Image: 'b' }, RestartPolicy: { Delay } } });
    assert.equal(restartDelayMs(spec(0), 0), 0);
    assert.deepEqual([1, 2, 3, 4].map((n) => restartDelayMs(spec(0), n)), [100, 200, 400, 800]);
    assert.equal(restartDelayMs(spec(0), 50), 60_000);
    assert.deepEqual([0, 1, 2, 5].map((n) => restartDelayMs(spec(5e9), n)), [5000, 5000, 10_000, 60_000]);
    assert.equal(restartDelayMs(spec(120e9), 3), 120_000, 'a delay above the cap stays as given');
  });

  it('applies the orchestrator defaults', () => {
    const spec = normalizeServiceSpec({ ...base, TaskTemplate: { ContainerSpec: { Image: 'b' }, RestartPolicy: { Condition: 'on-failure', Delay: 0 } }, UpdateConfig: { Parallelism: 3, FailureAction: '' } });
    assert.deepEqual(restartPolicy(spec), { Condition: 'on-failure', Delay: 0, MaxAttempts: 0, Window: 0 });
    assert.deepEqual(updateConfig(spec, false), { Parallelism: 3, Delay: 0, FailureAction: 'pause', Monitor: 5e9, MaxFailureRatio: 0, Order: 'stop-first' });
    assert.deepEqual(updateConfig(spec, true).Parallelism, 1);
    const full = withDefaults(spec);
    assert.equal(full.TaskTemplate!.ContainerSpec!.StopGracePeriod, 10e9);
    assert.deepEqual(full.EndpointSpec, { Mode: 'vip' });
    assert.deepEqual(spec.TaskTemplate!.ContainerSpec!.StopGracePeriod, undefined, 'the stored spec is left alone');
  });

  it('assigns ingress ports from 30000, keeps them across updates, and refuses a port another service holds', () => {
    const taken = new Map([['30000/tcp', 'other']]);
    const ports = resolvePorts({ Ports: [{ TargetPort: 80 }, { TargetPort: 53, Protocol: 'udp' }, { TargetPort: 9000, PublishedPort: 0, PublishMode: 'host' }] }, [], taken);
    assert.deepEqual(ports, [
      { Protocol: 'tcp', TargetPort: 80, PublishedPort: 30001, PublishMode: 'ingress' },
      { Protocol: 'udp', TargetPort: 53, PublishedPort: 30000, PublishMode: 'ingress' },
      { Protocol: 'tcp', TargetPort: 9000, PublishedPort: 0, PublishMode: 'host' },
    ]);
    assert.deepEqual(resolvePorts({ Ports: [{ TargetPort: 80 }] }, ports, new Map())[0]!.PublishedPort, 30001);
    assert.throws(() => resolvePorts({ Ports: [{ TargetPort: 80, PublishedPort: 8080 }] }, [], new Map([['8080/tcp', 'web']])), /port '8080' is already in use by service 'web'/);
  });

  it('replaces tasks only for template or host-port changes, or when the mesh starts or stops being used', () => {
    const a = normalizeServiceSpec({ ...base, Mode: { Replicated: { Replicas: 2 } } });
    assert.equal(templateChanged(a, { ...a, Mode: { Replicated: { Replicas: 5 } } }), false);
    assert.equal(templateChanged(a, { ...a, Labels: { x: 'y' } }), false);
    assert.equal(templateChanged(a, { ...a, TaskTemplate: { ContainerSpec: { Image: 'busybox' }, ForceUpdate: 1 } }), true);
    assert.equal(templateChanged(a, { ...a, TaskTemplate: { ContainerSpec: { Image: 'busybox', Env: ['A=1'] } } }), true);
    // A first ingress port: the tasks join the ingress network; another one changes nothing for them.
    assert.equal(templateChanged(a, { ...a, EndpointSpec: { Ports: [{ TargetPort: 80 }] } }), true);
    const published = { ...a, EndpointSpec: { Ports: [{ TargetPort: 80 }] } };
    assert.equal(templateChanged(published, { ...a, EndpointSpec: { Ports: [{ TargetPort: 80 }, { TargetPort: 81, PublishedPort: 8081 }] } }), false);
    assert.equal(templateChanged(published, a), true);
    assert.equal(templateChanged(a, { ...a, EndpointSpec: { Ports: [{ TargetPort: 80, PublishMode: 'host' }] } }), true);
    // Key order is not a change.
    const b = { ...a, TaskTemplate: { ContainerSpec: { Env: ['A=1'], Image: 'busybox' } } };
    const c = { ...a, TaskTemplate: { ContainerSpec: { Image: 'busybox', Env: ['A=1'] } } };
    assert.equal(templateChanged(b, c), false);
  });

  it('makes the task container: command, args, labels, limits, hosts, host-mode ports and templates', () => {
    const t: TaskRecord = {
      id: 'task1',
      version: 1,
      createdAt: '',
      updatedAt: '',
      serviceId: 'svc1',
      serviceName: 'web',
      slot: 2,
      nodeId: 'node1',
      spec: {
        ContainerSpec: {
          Image: 'busybox',
          Command: ['sh', '-c'],
          Args: ['echo hi'],
          Env: ['WHO={{.Service.Name}}-{{.Task.Slot}}', 'PLAIN=1'],
          Hostname: '{{.Node.Hostname}}-{{.Task.Name}}',
          Labels: { 'com.docker.swarm.task.id': 'forged', mine: 'yes' },
          Hosts: ['10.0.0.1 db database'],
          StopGracePeriod: 3e9,
          DNSConfig: { Nameservers: ['1.1.1.1'] },
        },
        Resources: { Limits: { MemoryBytes: 64 << 20, NanoCPUs: 5e8 } },
      },
      templateVersion: 1,
      desiredState: 'running',
      status: { timestamp: '', state: 'preparing', message: '', err: '', containerId: '', pid: 0 },
      restarts: [],
    };
    const req = taskContainerRequest(t, [{ Protocol: 'tcp', TargetPort: 80, PublishedPort: 8080, PublishMode: 'host' }, { Protocol: 'tcp', TargetPort: 81, PublishedPort: 30001, PublishMode: 'ingress' }], { nodeHostname: 'box', serviceLabels: {} });
    assert.equal(req.name, 'web.2.task1');
    assert.deepEqual(req.config.Entrypoint, ['sh', '-c']);
    assert.deepEqual(req.config.Cmd, ['echo hi']);
    assert.deepEqual(req.config.Env, ['WHO=web-2', 'PLAIN=1']);
    assert.equal(req.config.Hostname, 'box-web.2.task1');
    assert.equal(req.config.StopTimeout, 3);
    assert.equal(req.config.Labels!['com.docker.swarm.task.id'], 'task1');
    assert.equal(req.config.Labels!['com.docker.swarm.task.name'], 'web.2.task1');
    assert.equal(req.config.Labels!.mine, 'yes');
    assert.deepEqual(req.hostConfig.ExtraHosts, ['db:10.0.0.1', 'database:10.0.0.1']);
    assert.equal(req.hostConfig.Memory, 64 << 20);
    assert.equal(req.hostConfig.NanoCpus, 5e8);
    assert.deepEqual(req.hostConfig.Dns, ['1.1.1.1']);
    assert.deepEqual(req.hostConfig.RestartPolicy, { Name: 'no', MaximumRetryCount: 0 });
    assert.deepEqual(req.hostConfig.PortBindings, { '80/tcp': [{ HostIp: '', HostPort: '8080' }] });
    assert.deepEqual(Object.keys(req.config.ExposedPorts ?? {}).sort(), ['80/tcp', '81/tcp']);
    assert.equal(expandTemplate('{{.Unknown.Thing}}', t, { nodeHostname: 'box', serviceLabels: {} }), '{{.Unknown.Thing}}');
  });
});
