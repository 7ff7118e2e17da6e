/** Median, min and max of a sample list; the median of an even count is the mean of the middle two. */

export interface Summary {
  n: number;
  median: number;
  min: number;
  max: number;
}

export function summarize(samples: readonly number[]): Summary | undefined {
  if (samples.length === 0) return undefined;
  const s = [...samples].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { n: s.length, median, min: s[0]!, max: s[s.length - 1]! };
}
