import { startDaemon } from '../../test/harness/daemon.js';
import { onCleanup } from '../lib/cleanup.js';
import { assembleEngine, type Engine } from './engine.js';

/** berthd from this checkout (bin/berthd, after the root build), through the test harness's runner. */
export async function startBerth(o: { dockerConfig: string; logLevel?: string }): Promise<Engine> {
  const d = await startDaemon({ args: ['--log-level', o.logLevel ?? 'info'], readyTimeoutMs: 60_000 });
  const undo = onCleanup('berthd', () => d.teardown());
  try {
    const engine = await assembleEngine({
      name: 'berth',
      socket: d.socket,
      dir: d.dir,
      pid: () => d.pid,
      dockerConfig: o.dockerConfig,
      details: 'berthd from this checkout, default runtime',
      stopDaemon: async () => {
        await d.teardown();
        undo();
      },
    });
    return engine;
  } catch (err) {
    await d.teardown();
    undo();
    throw err;
  }
}
