/** Signal names and numbers as `docker kill --signal` and StopSignal give them (Linux numbering). */

const SIGNALS: Record<string, number> = {
  HUP: 1, INT: 2, QUIT: 3, ILL: 4, TRAP: 5, ABRT: 6, IOT: 6, BUS: 7, FPE: 8, KILL: 9, USR1: 10, SEGV: 11, USR2: 12,
  PIPE: 13, ALRM: 14, TERM: 15, STKFLT: 16, CHLD: 17, CONT: 18, STOP: 19, TSTP: 20, TTIN: 21, TTOU: 22, URG: 23,
  XCPU: 24, XFSZ: 25, VTALRM: 26, PROF: 27, WINCH: 28, IO: 29, POLL: 29, PWR: 30, SYS: 31,
};

/** `SIGTERM`, `TERM`, `15` → "15"; unknown → "". */
export function signalNumber(sig: string): string {
  if (/^\d+$/.test(sig)) return Number(sig) > 0 && Number(sig) <= 64 ? String(Number(sig)) : '';
  const name = sig.toUpperCase().replace(/^SIG/, '');
  const rt = /^RTMIN(\+(\d+))?$/.exec(name);
  if (rt) return String(34 + Number(rt[2] ?? 0));
  return SIGNALS[name] !== undefined ? String(SIGNALS[name]) : '';
}
