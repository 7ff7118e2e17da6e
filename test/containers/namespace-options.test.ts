/**
 * HostConfig options of issue 21 honoured in real containers: PidMode, UTSMode, IpcMode (host and
 * container:<id>), Links, GroupAdd, log drivers none and local, MemorySwappiness,
 * DeviceCgroupRules, Isolation, VolumeDriver, Runtime read back, removal of a restart=always
 * container, commit with pause of a stopped one.
 */
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readlinkSync, existsSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { useDaemonWithBusybox } from '../harness/busybox-daemon.js';

describe('namespace modes, links and other create options', () => {
  const { daemon, image: busybox } = useDaemonWithBusybox();
  let image = '';
  before(() => (image = busybox()));

  async function ok(args: string[]): Promise<string> {
    const r = await daemon().docker(args);
    assert.equal(r.code, 0, `docker ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }
  const inspect = async (id: string) => JSON.parse(await ok(['inspect', id]))[0];
  const mounted = (path: string) => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').some((l) => l.split(' ')[4] === path);

  it('PidMode host and container:<name> share the pid namespace; a stopped or unknown target is refused', async () => {
    const hostInit = readFileSync('/proc/1/comm', 'utf8').trim();
    assert.equal((await ok(['run', '--rm', '--pid', 'host', image, 'cat', '/proc/1/comm'])).trim(), hostInit);
    const donor = (await ok(['run', '-d', '--name', 'piddonor', image, 'sleep', '300'])).trim();
    const ps = await ok(['run', '--rm', '--pid', 'container:piddonor', image, 'ps']);
    assert.match(ps, /sleep 300/);
    const joined = (await ok(['create', '--pid', 'container:piddonor', image, 'true'])).trim();
    assert.equal((await inspect(joined)).HostConfig.PidMode, `container:${donor}`, 'stored by id');
    await ok(['stop', '-t', '0', 'piddonor']);
    const st = await daemon().request('POST', `/containers/${joined}/start`);
    assert.equal(st.status, 409, st.text());
    assert.match(st.json().message, /failed to join PID namespace: container [0-9a-f]{64} is not running/);
    const unknown = await daemon().request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { PidMode: 'container:nosuchthing' } } });
    assert.equal(unknown.status, 404);
    for (const mode of ['weird', 'private']) {
      const bad = await daemon().request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { PidMode: mode } } });
      assert.equal(bad.status, 400);
      assert.match(bad.json().message, new RegExp(`invalid PID mode: ${mode}`));
    }
  });

  it('UTSMode host shows the host name; a hostname with it is refused', async () => {
    assert.equal((await ok(['run', '--rm', '--uts', 'host', image, 'hostname'])).trim(), hostname());
    const r = await daemon().request('POST', '/containers/create', { body: { Image: image, Hostname: 'x', Cmd: ['true'], HostConfig: { UTSMode: 'host' } } });
    assert.equal(r.status, 400);
    assert.match(r.json().message, /conflicting options: hostname and the UTS mode/);
    const c = await daemon().request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { UTSMode: 'container:x' } } });
    assert.equal(c.status, 400);
    assert.match(c.json().message, /invalid UTS mode/);
  });

  it('IpcMode host, none, shareable and container:<id> (with the donor /dev/shm); a private donor is refused', async () => {
    const hostIpc = readlinkSync('/proc/self/ns/ipc');
    assert.equal((await ok(['run', '--rm', '--ipc', 'host', image, 'readlink', '/proc/self/ns/ipc'])).trim(), hostIpc);
    assert.notEqual((await ok(['run', '--rm', image, 'readlink', '/proc/self/ns/ipc'])).trim(), hostIpc);
    assert.equal((await ok(['run', '--rm', '--ipc', 'none', image, 'sh', '-c', 'test -d /dev/shm && echo shm || echo no-shm'])).trim(), 'no-shm');
    await ok(['run', '-d', '--name', 'ipcdonor', '--ipc', 'shareable', image, 'sh', '-c', 'echo from-donor > /dev/shm/x; exec sleep 300']);
    const donorNs = (await ok(['exec', 'ipcdonor', 'readlink', '/proc/self/ns/ipc'])).trim();
    const out = await ok(['run', '--rm', '--ipc', 'container:ipcdonor', image, 'sh', '-c', 'readlink /proc/self/ns/ipc; cat /dev/shm/x; echo from-joiner > /dev/shm/y']);
    assert.equal(out, `${donorNs}\nfrom-donor\n`);
    assert.equal(await ok(['exec', 'ipcdonor', 'cat', '/dev/shm/y']), 'from-joiner\n');
    // A joiner passes the donor's namespace and /dev/shm on.
    await ok(['run', '-d', '--name', 'ipcrelay', '--ipc', 'container:ipcdonor', image, 'sleep', '300']);
    assert.equal(await ok(['run', '--rm', '--ipc', 'container:ipcrelay', image, 'sh', '-c', 'readlink /proc/self/ns/ipc; cat /dev/shm/x']), `${donorNs}\nfrom-donor\n`);
    await ok(['rm', '-f', 'ipcrelay']);
    assert.equal((await inspect('ipcdonor')).HostConfig.IpcMode, 'shareable');
    await ok(['run', '-d', '--name', 'ipcprivate', image, 'sleep', '300']);
    assert.equal((await inspect('ipcprivate')).HostConfig.IpcMode, 'private', "dockerd's default");
    const r = await daemon().docker(['run', '--rm', '--ipc', 'container:ipcprivate', image, 'true']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /non-shareable IPC \(hint: use IpcMode:shareable for the donor container\)/);
    const donorShm = join(daemon().dataRoot, 'containers', (await inspect('ipcdonor')).Id, 'shm');
    assert.ok(mounted(donorShm), 'the shareable /dev/shm is a host tmpfs');
    await ok(['rm', '-f', 'ipcdonor', 'ipcprivate', 'piddonor']);
    assert.ok(!mounted(donorShm), 'unmounted with the container');
  });

  it('Links on the default bridge: the name, alias and hostname resolve; inspect shows dockerd\'s form', async () => {
    await ok(['run', '-d', '--name', 'linked', '--hostname', 'linkedhost', image, 'sleep', '300']);
    const ip = (await inspect('linked')).NetworkSettings.Networks.bridge.IPAddress as string;
    assert.match(ip, /^\d+\.\d+\.\d+\.\d+$/);
    const out = await ok(['run', '--name', 'linker', '--link', 'linked:db', image, 'sh', '-c', 'grep -w db /etc/hosts; ping -c 1 -W 2 db >/dev/null && echo reached']);
    assert.match(out, new RegExp(`^${ip.replace(/\./g, '\\.')}\\s+db linkedhost linked$`, 'm'));
    assert.match(out, /reached/);
    assert.deepEqual((await inspect('linker')).HostConfig.Links, ['/linked:/linker/db']);
    const bad = await daemon().request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: { Links: ['ghost:g'] } } });
    assert.equal(bad.status, 400);
    assert.match(bad.json().message, /could not get container for ghost/);
    // A running parent follows the linked container to its next address.
    await ok(['run', '-d', '--name', 'linkparent', '--link', 'linked:db', image, 'sleep', '300']);
    await ok(['stop', '-t', '0', 'linked']);
    const dead = await daemon().request('POST', '/containers/linker/start');
    assert.equal(dead.status, 500, 'as dockerd: a spec that cannot be built is a system error');
    assert.match(dead.json().message, /^Cannot link to a non running container: \/linked AS \/linker\/db$/);
    // Berth hands a restarted container its address back when it can: make the parent's entry stale
    // by hand (the file the daemon bind-mounts) to see it rewritten when the linked one starts.
    const hostsPath = (await inspect('linkparent')).HostsPath as string;
    writeFileSync(hostsPath, readFileSync(hostsPath, 'utf8').replace(new RegExp(`^${ip.replace(/\./g, '\\.')}(\\s+db)`, 'm'), '192.0.2.99$1'));
    assert.match(await ok(['exec', 'linkparent', 'grep', '-w', 'db', '/etc/hosts']), /^192\.0\.2\.99\s+db/m);
    await ok(['start', 'linked']);
    const newIp = (await inspect('linked')).NetworkSettings.Networks.bridge.IPAddress as string;
    assert.match(await ok(['exec', 'linkparent', 'grep', '-w', 'db', '/etc/hosts']), new RegExp(`^${newIp.replace(/\./g, '\\.')}\\s+db linkedhost linked$`, 'm'));
    // Renames carry the links along, as parent and as child.
    await ok(['rename', 'linked', 'linked2']);
    await ok(['rename', 'linkparent', 'linkparent2']);
    assert.deepEqual((await inspect('linkparent2')).HostConfig.Links, ['/linked2:/linkparent2/db']);
    await ok(['restart', '-t', '0', 'linkparent2']);
    assert.match(await ok(['exec', 'linkparent2', 'grep', '-w', 'db', '/etc/hosts']), /\sdb linkedhost linked2$/m);
    await ok(['rename', 'linked2', 'linked']);
    // docker rm --link drops the link and leaves both containers.
    await ok(['rm', '--link', '/linker/db']);
    assert.equal((await inspect('linker')).HostConfig.Links, null);
    assert.equal((await inspect('linked')).Name, '/linked');
    const gone = await daemon().docker(['rm', '--link', '/linker/db']);
    assert.match(gone.stderr, /No such container: \/linker\/db/);
    await ok(['rm', '-f', 'linked', 'linker', 'linkparent2']);
  });

  it('Links on a user-defined network: the alias answers with the linked container and Networks[*].Links shows it', async () => {
    await ok(['network', 'create', 'linknet']);
    try {
      await ok(['run', '-d', '--name', 'usrlinked', '--network', 'linknet', image, 'sleep', '300']);
      const ip = (await inspect('usrlinked')).NetworkSettings.Networks.linknet.IPAddress as string;
      const out = await ok(['run', '--name', 'usrlinker', '--network', 'linknet', '--link', 'usrlinked:dbalias', image, 'ping', '-c', '1', '-W', '2', 'dbalias']);
      assert.match(out, new RegExp(`PING dbalias \\(${ip.replace(/\./g, '\\.')}\\)`));
      const linker = await inspect('usrlinker');
      assert.deepEqual(linker.NetworkSettings.Networks.linknet.Links, ['usrlinked:dbalias']);
      assert.equal(linker.HostConfig.Links, null, 'dockerd keeps legacy links only on the default bridge');
      // A running linking container follows the linked one when it starts again.
      await ok(['run', '-d', '--name', 'usrparent', '--network', 'linknet', '--link', 'usrlinked:dbalias', image, 'sleep', '300']);
      const hostsPath = (await inspect('usrparent')).HostsPath as string;
      writeFileSync(hostsPath, readFileSync(hostsPath, 'utf8').replace(/^\S+(\s+dbalias)$/m, '192.0.2.98$1'));
      await ok(['restart', '-t', '0', 'usrlinked']);
      const now = (await inspect('usrlinked')).NetworkSettings.Networks.linknet.IPAddress as string;
      assert.match(await ok(['exec', 'usrparent', 'grep', '-w', 'dbalias', '/etc/hosts']), new RegExp(`^${now.replace(/\./g, '\\.')}\\s+dbalias$`, 'm'));
    } finally {
      await daemon().docker(['rm', '-f', 'usrlinked', 'usrlinker', 'usrparent']);
      await daemon().docker(['network', 'rm', 'linknet']);
    }
  });

  it('GroupAdd resolves names in the image and takes numbers as they are', async () => {
    const groups = (await ok(['run', '--rm', '--group-add', 'berth', '--group-add', '4242', image, 'id', '-G'])).trim().split(/\s+/);
    assert.ok(groups.includes('1000') && groups.includes('4242'), groups.join(' '));
    // Exec processes get them too, also as another user (dockerd adds GroupAdd to every process).
    await ok(['run', '-d', '--name', 'groupadd', '--group-add', '4242', image, 'sleep', '300']);
    for (const user of [[], ['-u', 'nobody']]) {
      const g = (await ok(['exec', ...user, 'groupadd', 'id', '-G'])).trim().split(/\s+/);
      assert.ok(g.includes('4242'), `exec ${user.join(' ')}: ${g.join(' ')}`);
    }
    await ok(['rm', '-f', 'groupadd']);
    const r = await daemon().docker(['run', '--rm', '--group-add', 'nosuchgroup', image, 'true']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /Unable to find group nosuchgroup/);
  });

  it('log driver none keeps nothing and refuses reading; local stores and reads back', async () => {
    const none = await ok(['run', '--name', 'nolog', '--log-driver', 'none', image, 'echo', 'attached-output']);
    assert.match(none, /attached-output/, 'attach still streams');
    const logs = await daemon().docker(['logs', 'nolog']);
    assert.notEqual(logs.code, 0);
    assert.match(logs.stderr, /configured logging driver does not support reading/);
    const c = await inspect('nolog');
    assert.equal(c.HostConfig.LogConfig.Type, 'none');
    assert.ok(!existsSync(c.LogPath) || readFileSync(c.LogPath, 'utf8') === '', 'no log kept');
    await ok(['run', '--name', 'locallog', '--log-driver', 'local', image, 'echo', 'kept-line']);
    assert.equal(await ok(['logs', 'locallog']), 'kept-line\n');
    assert.equal((await inspect('locallog')).HostConfig.LogConfig.Type, 'local');
    await ok(['rm', 'nolog', 'locallog']);
  });

  it('MemorySwappiness, DeviceCgroupRules, Isolation, VolumeDriver and Runtime as dockerd takes them', async () => {
    const d = daemon();
    const v1 = existsSync('/sys/fs/cgroup/memory/memory.swappiness');
    const c = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['sh', '-c', 'cat /sys/fs/cgroup/memory/memory.swappiness 2>/dev/null; mknod /dev/k c 1 11; (exec 3>>/dev/k) 2>/dev/null && echo dev-open || echo dev-denied'], HostConfig: { MemorySwappiness: 17, DeviceCgroupRules: ['c 1:11 w'], Isolation: 'default', VolumeDriver: 'local', Runtime: 'runc' } } });
    assert.equal(c.status, 201, c.text());
    const id = c.json().Id as string;
    if (!v1) assert.match(c.json().Warnings.join(), /Memory swappiness discarded/);
    await ok(['start', '-a', id]).then((out) => assert.equal(out, v1 ? '17\ndev-open\n' : 'dev-open\n'));
    const info = await inspect(id);
    assert.equal(info.HostConfig.MemorySwappiness, v1 ? 17 : null);
    assert.deepEqual(info.HostConfig.DeviceCgroupRules, ['c 1:11 w']);
    assert.equal(info.HostConfig.Runtime, 'runc', 'reads back as asked');
    assert.equal((await ok(['run', '--rm', image, 'sh', '-c', 'mknod /dev/k c 1 11; (exec 3>>/dev/k) 2>/dev/null && echo dev-open || echo dev-denied'])).trim(), 'dev-denied');
    // Empty Runtime: dockerd fills in its default runtime's name, the one `docker info` shows.
    const dflt = (await ok(['create', image, 'true'])).trim();
    assert.equal((await inspect(dflt)).HostConfig.Runtime, (await ok(['info', '--format', '{{.DefaultRuntime}}'])).trim());
    const bad = async (hc: Record<string, unknown>, status: number, re: RegExp) => {
      const r = await d.request('POST', '/containers/create', { body: { Image: image, Cmd: ['true'], HostConfig: hc } });
      assert.equal(r.status, status, r.text());
      assert.match(r.json().message, re);
    };
    await bad({ Isolation: 'hyperv' }, 400, /invalid isolation \(hyperv\): linux only supports 'default'/);
    await bad({ DeviceCgroupRules: ['c 1:1  rwm'] }, 400, /invalid device cgroup rule format: 'c 1:1  rwm'/);
    await bad({ VolumeDriver: 'nfsplug' }, 404, /plugin "nfsplug" not found/);
    if (v1) await bad({ MemorySwappiness: 101 }, 400, /valid memory swappiness range is 0-100/);
    await ok(['rm', '-f', id, dflt]);
  });

  it('a running or restarting container with restart policy always is not removed without force', async () => {
    await ok(['run', '-d', '--name', 'always', '--restart', 'always', image, 'sleep', '300']);
    const r = await daemon().docker(['rm', 'always']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /container is running: stop the container before removing or force remove/);
    await ok(['run', '-d', '--name', 'flapping', '--restart', 'always', image, 'sh', '-c', 'sleep 0.2; exit 3']);
    let restarting = false;
    for (let i = 0; i < 100 && !restarting; i++) {
      restarting = (await inspect('flapping')).State.Restarting === true;
      if (!restarting) await new Promise((res) => setTimeout(res, 50));
    }
    assert.ok(restarting, 'saw the restarting state');
    const rr = await daemon().request('DELETE', '/containers/flapping');
    // Between restarts or just started again: either way it is running in dockerd's sense.
    assert.equal(rr.status, 409, rr.text());
    assert.match(rr.json().message, /container is (restarting|running): stop the container before removing or force remove/);
    await ok(['rm', '-f', 'always', 'flapping']);
  });

  it('commit with pause=true of a stopped container ignores the pause', async () => {
    await ok(['run', '--name', 'tocommit', image, 'sh', '-c', 'echo kept > /marker']);
    const r = await daemon().request('POST', '/commit?container=tocommit&repo=committed&tag=v1&pause=true');
    assert.equal(r.status, 201, r.text());
    assert.equal(await ok(['run', '--rm', 'committed:v1', 'cat', '/marker']), 'kept\n');
    await ok(['rm', 'tocommit']);
    await ok(['rmi', 'committed:v1']);
  });
});
