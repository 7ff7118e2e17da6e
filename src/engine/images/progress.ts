/** Progress records as dockerd streams them for pulls, pushes and loads. */
export interface ProgressMessage {
  status?: string;
  id?: string;
  progressDetail?: { current?: number; total?: number };
  progress?: string;
  errorDetail?: { message: string; code?: number };
  error?: string;
  aux?: unknown;
  /** Text lines (load's `Loaded image: ...`). */
  stream?: string;
}

export type ProgressSink = (m: ProgressMessage) => void;

/** Decimal units as the docker CLI prints sizes: 1.2MB, 512kB, 12B. */
export function humanSize(bytes: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = bytes;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toPrecision(3).replace(/\.?0+$/, '')}${units[i]}`;
}

/** The pre-rendered bar older clients display: `[=====>      ]  1.2MB/3.4MB`. */
export function progressBar(current: number, total: number): string {
  const width = 50;
  if (total <= 0) return `${humanSize(current)}`;
  const filled = Math.min(width, Math.floor((current / total) * width));
  const bar = '='.repeat(Math.max(0, filled - 1)) + (filled > 0 ? (filled === width ? '=' : '>') : '') + ' '.repeat(width - filled);
  return `[${bar}]  ${humanSize(current)}/${humanSize(total)}`;
}

/**
 * Rate-limits progress updates for one item: at most every 100 ms, and only after 1% or 512 KiB
 * more, with the final figure always sent.
 */
export class ProgressThrottle {
  #lastAt = 0;
  #lastBytes = -1;
  constructor(
    private readonly sink: ProgressSink,
    private readonly id: string,
    private readonly status: string,
    private readonly total: number,
  ) {}

  update(current: number, force = false): void {
    const now = Date.now();
    const step = Math.min(512 * 1024, Math.max(1, this.total / 100));
    if (current === this.#lastBytes) return; // the final figure was already sent
    if (!force && (now - this.#lastAt < 100 || current - this.#lastBytes < step)) return;
    this.#lastAt = now;
    this.#lastBytes = current;
    this.sink({ status: this.status, progressDetail: { current, total: this.total }, progress: progressBar(current, this.total), id: this.id });
  }
}
