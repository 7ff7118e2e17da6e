/**
 * Structured logs: one JSON object per line on stderr. No logger library on hot paths;
 * debug lines are skipped before any formatting when the level is higher.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'fatal';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, fatal: 50 };

let threshold = ORDER.info;

export function setLogLevel(level: string): void {
  if (!(level in ORDER)) throw new Error(`invalid log level: ${level}`);
  threshold = ORDER[level as LogLevel];
}

export function isLogEnabled(level: LogLevel): boolean {
  return ORDER[level] >= threshold;
}

function emit(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
  if (ORDER[level] < threshold) return;
  const rec: Record<string, unknown> = { time: new Date().toISOString(), level, msg };
  if (fields) {
    for (const [k, v] of Object.entries(fields)) rec[k] = v instanceof Error ? v.message : v;
  }
  process.stderr.write(JSON.stringify(rec) + '\n');
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => emit('debug', msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit('info', msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit('warn', msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => emit('error', msg, fields),
};
