/**
 * One suite, run by compose v2 and by compose v1: the app project (app-project.ts) brought up, used
 * and taken down through the client, asserting on what the engine holds (inspect, list, networks)
 * and on what the containers serve, not on exit codes alone.
 */
import { writeFileSync } from 'node:fs';
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useDaemon, useSeededRegistry, freePort } from '../harness/index.js';
import { appProject } from './app-project.js';
import { composeProject, eventually, httpGet, inspectContainer, type Compose, type ComposeVersion } from './support.js';

/**
 * Compose v2 builds through BuildKit unless DOCKER_BUILDKIT=0, and Berth serves the classic builder only
 * (`Builder-Version: 1`); compose v1 builds through the API either way.
 */
const CLASSIC_BUILD = { DOCKER_BUILDKIT: '0' };

export function composeSuite(version: ComposeVersion): void {
  describe(`docker compose ${version}: the app project`, () => {
    const daemon = useDaemon();
    const reg = useSeededRegistry('open');
    let app: Compose;
    let port = 0;
    const project = `app${version}`;

    before(async () => {
      port = await freePort();
      app = composeProject(daemon(), version, project, appProject({ image: reg().seeded.refs.busybox, port }));
    });
    after(async () => {
      await app?.run(['down', '-v', '--remove-orphans', '-t', '0'], { allowFail: true });
    });

    it('config prints the normalized project; profiles gate services', async () => {
      const services = (await app.run(['config', '--services'])).stdout.trim().split('\n').sort();
      // compose 1.29 lists every service here; v2 only those of the active profiles.
      assert.deepEqual(services, version === 'v2' ? ['db', 'migrate', 'web', 'worker'] : ['db', 'debug', 'migrate', 'web', 'worker']);
      const withDebug = (await app.run(['--profile', 'debug', 'config', '--services'])).stdout.trim().split('\n').sort();
      assert.deepEqual(withDebug, ['db', 'debug', 'migrate', 'web', 'worker']);
      const cfg = (await app.run(['config'])).stdout;
      assert.match(cfg, new RegExp(`image: ${reg().seeded.refs.busybox.replace(/[.]/g, '\\.')}`));
      assert.match(cfg, /condition: service_healthy/);
    });

    it(`up -d${version === 'v2' ? ' --wait' : ''}: dependencies in order, every setting on the containers, the app works`, async () => {
      const d = daemon();
      // The image is not pulled beforehand: up pulls it from the seeded registry.
      await app.run(version === 'v2' ? ['up', '-d', '--wait'] : ['up', '-d'], { timeoutMs: 300_000 });

      const db = await inspectContainer(d, app.container('db'));
      const web = await eventually('web healthy', async () => {
        const w = await inspectContainer(d, app.container('web'));
        return w.State.Health?.Status === 'healthy' ? w : undefined;
      });
      assert.equal(db.State.Health.Status, 'healthy');
      const migrate = await inspectContainer(d, app.container('migrate'));
      assert.equal(migrate.State.Status, 'exited');
      assert.equal(migrate.State.ExitCode, 0);
      // depends_on: web started after db became healthy and after migrate completed.
      assert.ok(Date.parse(migrate.State.FinishedAt) <= Date.parse(web.State.StartedAt), 'migrate finished before web started');
      assert.ok(Date.parse(db.State.StartedAt) < Date.parse(web.State.StartedAt), 'db started before web');

      // Compose's labels and the service's own.
      assert.equal(web.Config.Labels['com.docker.compose.project'], project);
      assert.equal(web.Config.Labels['com.docker.compose.service'], 'web');
      assert.equal(web.Config.Labels['com.example.role'], 'web');
      // init, tmpfs, ulimits, resource limits, restart policy.
      assert.equal(web.HostConfig.Init, true);
      assert.deepEqual(Object.keys(web.HostConfig.Tmpfs ?? {}), ['/scratch']);
      assert.deepEqual(web.HostConfig.Ulimits, [{ Name: 'nofile', Soft: 1024, Hard: 2048 }]);
      assert.equal(web.HostConfig.Memory, 64 * 1024 * 1024);
      assert.equal(web.HostConfig.NanoCpus, 500_000_000);
      assert.equal(web.HostConfig.PidsLimit, 100);
      assert.equal(web.HostConfig.RestartPolicy.Name, 'unless-stopped');
      // ...and in effect inside the container.
      const limits = await app.run(['exec', '-T', 'web', 'sh', '-c', 'ulimit -n; ulimit -Hn; grep " /scratch " /proc/mounts | cut -d" " -f3; cat /proc/1/comm']);
      const [soft, hard, fstype, pid1] = limits.stdout.trim().split('\n');
      assert.deepEqual([soft, hard, fstype], ['1024', '2048', 'tmpfs']);
      assert.notEqual(pid1, 'httpd', 'with init: true, pid 1 is the init process, not the service');

      // Networks: web on both project networks, db reachable as `database` on backend only.
      assert.deepEqual(Object.keys(web.NetworkSettings.Networks).sort(), [`${project}_backend`, `${project}_frontend`]);
      assert.deepEqual(Object.keys(db.NetworkSettings.Networks), [`${project}_backend`]);
      assert.ok(db.NetworkSettings.Networks[`${project}_backend`].Aliases.includes('database'), JSON.stringify(db.NetworkSettings.Networks));
      const nets = (await d.request('GET', `/networks?filters=${encodeURIComponent(JSON.stringify({ label: [`com.docker.compose.project=${project}`] }))}`)).json() as { Name: string }[];
      assert.deepEqual(nets.map((n) => n.Name).sort(), [`${project}_backend`, `${project}_frontend`]);

      // The published port serves web's page; the worker's rows land in the database.
      assert.equal((await httpGet(port, '/')).trim(), 'web-ok');
      await eventually('rows stored in db', async () => {
        const rows = (await app.run(['exec', '-T', 'db', 'cat', '/data/rows'])).stdout;
        return /^row-1\nrow-2\n/.test(rows) ? rows : undefined;
      });
      // Service names and aliases resolve: the worker reads the rows back by alias and web by name.
      const back = await app.run(['exec', '-T', 'worker', 'sh', '-c', 'wget -q -O- http://database:5433/rows && wget -q -O- http://web:8080/']);
      assert.match(back.stdout, /^row-1\n(row-\d+\n)*web-ok\n$/);
      // db is not on frontend: the debug profile's service cannot reach it; nothing from it runs yet.
      assert.deepEqual(await app.ids('debug'), []);
    });

    it('ps, port, top', async () => {
      const ps = (await app.run(['ps'])).stdout;
      for (const s of ['db', 'web', 'worker']) assert.match(ps, new RegExp(app.container(s)));
      // v2 lists running containers, v1 every container (the exited migration too).
      const q = (await app.run(['ps', '-q'])).stdout.trim().split('\n').sort();
      const want = [...(await app.ids('db', false)), ...(await app.ids('web', false)), ...(await app.ids('worker', false)), ...(version === 'v1' ? await app.ids('migrate') : [])];
      assert.deepEqual(q.map((id) => id.slice(0, 12)), want.map((id) => id.slice(0, 12)).sort());
      assert.equal((await app.run(['port', 'web', '8080'])).stdout.trim(), `127.0.0.1:${port}`);
      const top = (await app.run(['top', 'worker'])).stdout;
      assert.match(top, /sleep 1|while true/);
    });

    it('logs: --tail, -t, -f', async () => {
      const tail = (await app.run(['logs', '--no-color', '--tail', '1', 'worker'])).stdout.trim().split('\n').filter((l) => !l.startsWith('Attaching to'));
      assert.equal(tail.length, 1);
      assert.match(tail[0]!, /stored row-\d+$/);
      const ts = (await app.run(['logs', '--no-color', '-t', 'migrate'])).stdout;
      assert.match(ts, /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d+Z migrated/);
      const follow = app.spawn(['logs', '--no-color', '-f', '--tail', '0', 'worker']);
      try {
        const n = await eventually('logs -f streams new lines', async () => {
          const rows = follow.output().match(/stored row-(\d+)/g) ?? [];
          return rows.length >= 2 ? rows.length : undefined;
        });
        assert.ok(n >= 2);
      } finally {
        await follow.stop();
      }
    });

    it('exec', async () => {
      assert.equal((await app.run(['exec', '-T', 'web', 'cat', '/www/index.html'])).stdout.trim(), 'web-ok');
      const env = await app.run(['exec', '-T', '-e', 'FOO=bar', 'db', 'sh', '-c', 'echo $FOO']);
      assert.equal(env.stdout.trim(), 'bar');
      const user = await app.run(['exec', '-T', '-u', 'nobody', '-w', '/tmp', 'db', 'sh', '-c', 'id -un; pwd']);
      assert.equal(user.stdout.trim(), 'nobody\n/tmp');
      const failed = await app.run(['exec', '-T', 'db', 'sh', '-c', 'exit 7'], { allowFail: true });
      assert.equal(failed.code, 7);
    });

    // compose 1.29's `run` links the one-off container to the service's dependencies (HostConfig.Links).
    it('run --rm', async () => {
      const d = daemon();
      const before = (await d.request('GET', '/containers/json?all=1')).json().length as number;
      const r = await app.run(['run', '--rm', '--no-deps', '-T', 'worker', 'sh', '-c', 'wget -q -O- http://database:5433/rows | head -1']);
      assert.equal(r.stdout.trim(), 'row-1');
      const afterList = await eventually('run --rm removed its container', async () => {
        const n = (await d.request('GET', '/containers/json?all=1')).json().length as number;
        return n === before ? n : undefined;
      });
      assert.equal(afterList, before);
    });

    it('pause, unpause, stop, start, restart; events reports them', async () => {
      const d = daemon();
      const events = app.spawn(['events', '--json']);
      try {
        // Subscribed once an exec in the worker shows up in the stream.
        await eventually('events subscribed', async () => {
          await app.run(['exec', '-T', 'worker', 'true']);
          return /exec_(create|start|die)/.test(events.output()) ? true : undefined;
        }, 30, 300);
        await app.run(['pause', 'worker']);
        assert.equal((await inspectContainer(d, app.container('worker'))).State.Status, 'paused');
        await app.run(['unpause', 'worker']);
        assert.equal((await inspectContainer(d, app.container('worker'))).State.Status, 'running');
        await app.run(['stop', '-t', '1', 'worker']);
        const stopped = await inspectContainer(d, app.container('worker'));
        assert.equal(stopped.State.Status, 'exited');
        await app.run(['start', 'worker']);
        const started = await inspectContainer(d, app.container('worker'));
        assert.equal(started.State.Status, 'running');
        await app.run(['restart', '-t', '1', 'worker']);
        const restarted = await inspectContainer(d, app.container('worker'));
        assert.equal(restarted.State.Status, 'running');
        assert.ok(Date.parse(restarted.State.StartedAt) > Date.parse(started.State.StartedAt));
        const seen = await eventually('events for the worker', async () => {
          const actions = events.output().trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { service?: string; action?: string })
            .filter((e) => e.service === 'worker').map((e) => e.action);
          return ['pause', 'unpause', 'stop', 'start', 'restart'].every((a) => actions.includes(a)) ? actions : undefined;
        }, 50);
        assert.ok(seen.includes('die'));
      } finally {
        await events.stop();
      }
    });

    it('--scale, --force-recreate, --no-deps, profiles', async () => {
      const d = daemon();
      const dbIds = await app.ids('db', false);
      await app.run(['up', '-d', '--no-recreate', '--scale', 'worker=3'], { timeoutMs: 300_000 });
      const workers = await app.ids('worker', false);
      assert.equal(workers.length, 3);
      for (let n = 1; n <= 3; n++) assert.equal((await inspectContainer(d, app.container('worker', n))).State.Running, true);
      await app.run(['up', '-d', '--no-recreate', '--scale', 'worker=1']);
      assert.equal((await app.ids('worker', false)).length, 1);

      const webBefore = await app.ids('web');
      await app.run(['up', '-d', '--force-recreate', '--no-deps', 'web'], { timeoutMs: 300_000 });
      const webAfter = await app.ids('web');
      assert.equal(webAfter.length, 1);
      assert.notEqual(webAfter[0], webBefore[0], 'web was recreated');
      assert.deepEqual(await app.ids('db', false), dbIds, '--no-deps left db alone');
      assert.equal((await httpGet(port, '/')).trim(), 'web-ok');

      await app.run(['--profile', 'debug', 'up', '-d', '--no-deps', 'debug']);
      const dbg = await inspectContainer(d, app.container('debug'));
      assert.equal(dbg.State.Running, true);
      assert.deepEqual(Object.keys(dbg.NetworkSettings.Networks), [`${project}_frontend`]);
      // On frontend only: web resolves, the database alias does not.
      const probe = await app.run(['exec', '-T', 'debug', 'sh', '-c', 'wget -q -O- http://web:8080/; nslookup database >/dev/null 2>&1 && echo db-visible || echo db-hidden']);
      assert.equal(probe.stdout.trim(), 'web-ok\ndb-hidden');
    });

    it('restart policy: always brings the worker back after its process exits', async () => {
      const d = daemon();
      const before = await inspectContainer(d, app.container('worker'));
      await app.run(['exec', '-T', 'worker', 'touch', '/tmp/exit']);
      const back = await eventually('worker restarted by its policy', async () => {
        const w = await inspectContainer(d, app.container('worker'));
        return w.State.Running && w.RestartCount > before.RestartCount ? w : undefined;
      });
      assert.equal(back.Id, before.Id);
      assert.equal(back.HostConfig.RestartPolicy.Name, 'always');
    });

    it('down removes the containers and networks; --rmi local keeps the registry image', async () => {
      const d = daemon();
      await app.run(['--profile', 'debug', 'down', '-t', '1']);
      for (const s of ['db', 'web', 'worker', 'migrate', 'debug']) assert.deepEqual(await app.ids(s), [], `${s} removed`);
      const nets = (await d.request('GET', `/networks?filters=${encodeURIComponent(JSON.stringify({ label: [`com.docker.compose.project=${project}`] }))}`)).json() as unknown[];
      assert.deepEqual(nets, []);
      // Nothing is served any more.
      await assert.rejects(fetch(`http://127.0.0.1:${port}/`));
      // Up again from nothing, then down -v (no volumes here), and down --rmi local (the image has a registry name: kept).
      await app.run(['up', '-d', 'web'], { timeoutMs: 300_000 });
      assert.equal((await httpGet(port, '/')).trim(), 'web-ok');
      await app.run(['down', '-v', '--rmi', 'local', '-t', '1']);
      assert.deepEqual(await app.ids('web'), []);
      assert.equal((await d.request('GET', `/images/${encodeURIComponent(reg().seeded.refs.busybox)}/json`)).status, 200);
    });

    it('external networks: a project joins a network it did not create and leaves it in place', async () => {
      const d = daemon();
      const net = `ext-${version}`;
      assert.equal((await d.docker(['network', 'create', net])).code, 0);
      const peer = await d.docker(['run', '-d', '--name', `peer-${version}`, '--network', net, '--network-alias', 'peer', reg().seeded.refs.busybox, 'sh', '-c', 'echo peer-ok > /tmp/index.html && exec httpd -f -p 80 -h /tmp']);
      assert.equal(peer.code, 0, peer.stderr);
      const ext = composeProject(d, version, `ext${version}`, {
        services: { client: { image: reg().seeded.refs.busybox, command: ['sleep', '300'], networks: ['shared'] } },
        networks: { shared: { external: true, name: net } },
      });
      await ext.run(['up', '-d']);
      const got = await eventually('the client reaches the peer on the external network', async () => {
        const r = await ext.run(['exec', '-T', 'client', 'wget', '-q', '-O-', 'http://peer/index.html'], { allowFail: true });
        return r.code === 0 ? r.stdout : undefined;
      }, 20);
      assert.equal(got.trim(), 'peer-ok');
      await ext.run(['down', '-t', '0']);
      assert.equal((await d.request('GET', `/networks/${net}`)).status, 200, 'the external network stays');
      assert.equal((await d.docker(['rm', '-f', `peer-${version}`])).code, 0);
      assert.equal((await d.docker(['network', 'rm', net])).code, 0);
    });

    // compose 1.29 mounts secrets outside swarm but not configs: v1 gets no configs section.
    it(`${version === 'v2' ? 'configs and ' : ''}secrets from files, bind mounts from the project directory`, async () => {
      const d = daemon();
      const p = composeProject(d, version, `files${version}`, {
        services: {
          app: {
            image: reg().seeded.refs.busybox,
            command: ['sleep', '300'],
            ...(version === 'v2' ? { configs: [{ source: 'settings', target: '/etc/app/settings.conf' }] } : {}),
            secrets: ['token'],
            volumes: ['./static:/srv/static:ro'],
          },
        },
        ...(version === 'v2' ? { configs: { settings: { file: './settings.conf' } } } : {}),
        secrets: { token: { file: './token.txt' } },
      });
      writeFileSync(`${p.dir}/settings.conf`, 'level=debug\n');
      writeFileSync(`${p.dir}/token.txt`, 's3cret\n');
      (await import('node:fs')).mkdirSync(`${p.dir}/static`);
      writeFileSync(`${p.dir}/static/page.html`, 'static-ok\n');
      await p.run(['up', '-d']);
      const r = await p.run(['exec', '-T', 'app', 'sh', '-c', `${version === 'v2' ? 'cat /etc/app/settings.conf; ' : ''}cat /run/secrets/token /srv/static/page.html; touch /srv/static/x 2>/dev/null || echo read-only`]);
      assert.equal(r.stdout, `${version === 'v2' ? 'level=debug\n' : ''}s3cret\nstatic-ok\nread-only\n`);
      const mounts = (await inspectContainer(d, p.container('app'))).Mounts as { Source: string; Destination: string; RW: boolean }[];
      assert.deepEqual(mounts.map((m) => [m.Destination, m.Source, m.RW]).sort(), [
        ...(version === 'v2' ? [['/etc/app/settings.conf', `${p.dir}/settings.conf`, false]] : []),
        ['/run/secrets/token', `${p.dir}/token.txt`, false],
        ['/srv/static', `${p.dir}/static`, false],
      ]);
      await p.run(['down', '-t', '0']);
    });

    if (version === 'v2') {
      it('configs and secrets given as content: and environment: (copied in through the archive endpoint)', async () => {
        const d = daemon();
        const p = composeProject(d, version, 'inline', {
          services: { app: { image: reg().seeded.refs.busybox, command: ['sleep', '300'], configs: [{ source: 'cfg', target: '/etc/cfg' }], secrets: ['tok'] } },
          configs: { cfg: { content: 'inline-config' } },
          secrets: { tok: { environment: 'BERTH_TEST_TOKEN' } },
        });
        await p.run(['up', '-d'], { env: { BERTH_TEST_TOKEN: 'from-env' } });
        const r = await p.run(['exec', '-T', 'app', 'sh', '-c', 'cat /etc/cfg; echo; cat /run/secrets/tok']);
        assert.equal(r.stdout.trim(), 'inline-config\nfrom-env');
        await p.run(['down', '-t', '0']);
      });

      it('config --resolve-image-digests pins images by digest (GET /distribution)', async () => {
        const cfg = (await app.run(['config', '--resolve-image-digests'])).stdout;
        assert.match(cfg, new RegExp(`image: ${reg().seeded.refs.busybox.replace(/[.]/g, '\\.')}@${reg().seeded.digests.busybox}`));
      });

      it('up --wait fails when a service turns unhealthy, and says which', async () => {
        const d = daemon();
        const p = composeProject(d, version, 'unhealthy', {
          services: { sick: { image: reg().seeded.refs.busybox, command: ['sleep', '300'], healthcheck: { test: ['CMD', 'false'], interval: '300ms', timeout: '2s', retries: 2 } } },
        });
        const r = await p.run(['up', '-d', '--wait'], { allowFail: true });
        assert.notEqual(r.code, 0);
        assert.match(r.stdout + r.stderr, /sick.*unhealthy|unhealthy.*sick/i);
        assert.equal((await inspectContainer(d, p.container('sick'))).State.Health.Status, 'unhealthy');
        await p.run(['down', '-t', '0']);
      });

      it('services on a platform: the image of that platform is pulled and shown', async () => {
        const d = daemon();
        const arch = process.arch === 'arm64' ? 'arm64' : 'amd64';
        const other = arch === 'amd64' ? 'arm64' : 'amd64';
        const p = composeProject(d, version, 'platforms', {
          services: {
            native: { image: reg().seeded.refs.multiarch, platform: `linux/${arch}`, command: ['sleep', '300'] },
            foreign: { image: reg().seeded.refs.multiarch, platform: `linux/${other}`, profiles: ['foreign'] },
          },
        });
        await p.run(['--profile', 'foreign', 'pull', 'foreign']);
        const foreign = (await d.request('GET', `/images/${encodeURIComponent(reg().seeded.refs.multiarch)}/json`)).json();
        assert.equal(foreign.Architecture, other);
        // up asks for the native platform again and gets it.
        await p.run(['up', '-d', '--pull', 'missing', 'native']);
        const native = await inspectContainer(d, p.container('native'));
        assert.equal(native.State.Running, true);
        const img = (await d.request('GET', `/images/${native.Image}/json`)).json();
        assert.deepEqual([img.Os, img.Architecture], ['linux', arch]);
        const images = (await p.run(['images', '--format', 'json'])).stdout;
        assert.match(images, new RegExp(`"Platform":"linux/${arch}"`));
        await p.run(['down', '-t', '0']);
      });

      it('compose cp in and out of a service container', async () => {
        const d = daemon();
        const { writeFileSync, readFileSync } = await import('node:fs');
        const p = composeProject(d, version, 'cp', { services: { app: { image: reg().seeded.refs.busybox, command: ['sleep', '300'] } } });
        await p.run(['up', '-d']);
        writeFileSync(`${p.dir}/in.txt`, 'copied-in\n');
        await p.run(['cp', `${p.dir}/in.txt`, 'app:/tmp/in.txt']);
        assert.equal((await p.run(['exec', '-T', 'app', 'cat', '/tmp/in.txt'])).stdout, 'copied-in\n');
        await p.run(['cp', 'app:/etc/passwd', `${p.dir}/passwd`]);
        assert.match(readFileSync(`${p.dir}/passwd`, 'utf8'), /^root:/);
        await p.run(['down', '-t', '0']);
      });
    }

    it('up in the foreground: attached output, --exit-code-from stops the rest and returns the exit code', async () => {
      const d = daemon();
      const p = composeProject(d, version, `fg${version}`, {
        services: {
          server: { image: reg().seeded.refs.busybox, command: ['sh', '-c', 'echo server-up; exec httpd -f -p 80 -h /etc'], stop_grace_period: '1s' },
          job: { image: reg().seeded.refs.busybox, command: ['sh', '-c', 'sleep 1; wget -q -O- http://server/hostname >/dev/null && echo job-reached-server; exit 3'], depends_on: ['server'] },
        },
      });
      const r = await p.run(['up', '--exit-code-from', 'job'], { allowFail: true, timeoutMs: 120_000 });
      assert.equal(r.code, 3, r.stdout + r.stderr);
      assert.match(r.stdout, /server.*\| server-up/);
      assert.match(r.stdout, /job.*\| job-reached-server/);
      const server = await inspectContainer(d, p.container('server'));
      assert.equal(server.State.Running, false, 'the other services were stopped');
      if (version === 'v2') {
        await p.run(['start', 'job']);
        const w = await p.run(['wait', 'job'], { allowFail: true });
        assert.equal(w.code, 3, w.stdout + w.stderr);
      }
      await p.run(['down', '-t', '0']);
    });

    it('named volumes are kept across down and up, removed by down -v', async () => {
      const d = daemon();
      const vol = composeProject(d, version, `vol${version}`, {
        services: { store: { image: reg().seeded.refs.busybox, command: ['sh', '-c', 'date +%s%N >> /data/starts; exec sleep 300'], volumes: ['data:/data'] } },
        volumes: { data: {} },
      });
      await vol.run(['up', '-d']);
      await eventually('first start recorded', async () => ((await vol.run(['exec', '-T', 'store', 'cat', '/data/starts'])).stdout.trim().split('\n').length === 1 ? true : undefined));
      await vol.run(['down', '-t', '0']);
      assert.equal((await d.request('GET', `/volumes/vol${version}_data`)).status, 200);
      await vol.run(['up', '-d']);
      const starts = await eventually('second start recorded', async () => {
        const lines = (await vol.run(['exec', '-T', 'store', 'cat', '/data/starts'])).stdout.trim().split('\n');
        return lines.length === 2 ? lines : undefined;
      });
      assert.equal(starts.length, 2);
      await vol.run(['down', '-v', '-t', '0']);
      assert.equal((await d.request('GET', `/volumes/vol${version}_data`)).status, 404);
    });

    it('build: sections with args and targets', async () => {
      const d = daemon();
      const b = composeProject(d, version, `build${version}`, {
        services: { app: { build: { context: '.', target: 'final', args: { GREETING: 'built-ok' } }, image: `build${version}-app:latest`, command: ['cat', '/greeting'] } },
      });
      writeFileSync(`${b.dir}/Dockerfile`, `FROM ${reg().seeded.refs.busybox} AS base\nARG GREETING\nRUN echo "$GREETING" > /greeting\nFROM base AS final\n`);
      await b.run(['build'], { env: CLASSIC_BUILD });
      const r = await b.run(['run', '--rm', '-T', 'app']);
      assert.equal(r.stdout.trim(), 'built-ok');
      await b.run(['down', '--rmi', 'all']);
    });

    it('pull fetches every service image; up --pull always fetches again', async () => {
      const d = daemon();
      const ref = reg().seeded.refs.busybox135;
      const p = composeProject(d, version, `pull${version}`, { services: { a: { image: ref, command: ['sleep', '300'] }, b: { image: ref, command: ['sleep', '300'] } } });
      await d.docker(['rmi', '-f', ref]);
      assert.equal((await d.request('GET', `/images/${encodeURIComponent(ref)}/json`)).status, 404);
      await p.run(['pull']);
      const img = await d.request('GET', `/images/${encodeURIComponent(ref)}/json`);
      assert.equal(img.status, 200);
      // Other tests' images may share this one's id (the multi-arch index's native child): includes, not equal.
      assert.ok(img.json().RepoDigests.includes(`${ref.replace(/:1\.35$/, '')}@${reg().seeded.digests.busybox}`), JSON.stringify(img.json().RepoDigests));
      if (version === 'v2') {
        const up = await p.run(['up', '-d', '--pull', 'always']);
        assert.match(up.stdout + up.stderr, /Pulled|Pulling/);
        assert.equal((await inspectContainer(d, p.container('a'))).Image, img.json().Id);
      }
      await p.run(['down', '-t', '0']);
    });

    it('push: service images to the registry', async () => {
      const d = daemon();
      const target = `${reg().registry.host}/pushed-${version}:latest`;
      // Compose pushes the images of services it builds; others are skipped (v1 and v2 alike).
      const p = composeProject(d, version, `push${version}`, { services: { app: { image: target, build: { context: '.' } } } });
      writeFileSync(`${p.dir}/Dockerfile`, `FROM ${reg().seeded.refs.busybox}\nRUN echo pushed-${version} > /pushed\n`);
      await p.run(['build'], { env: CLASSIC_BUILD });
      await p.run(['push']);
      assert.equal((await d.docker(['rmi', target])).code, 0);
      await p.run(['pull']);
      assert.equal((await d.request('GET', `/images/${encodeURIComponent(target)}/json`)).status, 200);
      const r = await d.docker(['run', '--rm', target, 'cat', '/pushed']);
      assert.equal(r.stdout, `pushed-${version}\n`, r.stderr);
    });
  });
}
