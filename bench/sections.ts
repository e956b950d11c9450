/** The sections of `npm run bench` (bench/run.ts), in the order they run. */
export const SECTIONS = [
  'strategies',
  'cache',
  'computer-use',
  'memory',
  'file',
  'latency',
  'small-prompt',
  'heap',
  'compaction',
  'workerd',
  'reliability',
  'inspector',
  'transfer',
  'fork',
  'tracing',
  'resume',
  'append-load',
  'file-small-prompt',
  'cold-turn',
  'realistic-window',
  'bundle',
] as const;
export type Section = (typeof SECTIONS)[number];

/** `notMeasured` of a run with `--only=<ran>`: every other section, not run. */
export function notRunExcept(...ran: Section[]): Record<string, string> {
  const reason = `not run: the run had --only=${ran.join(',')}`;
  return Object.fromEntries(SECTIONS.filter((section) => !ran.includes(section)).map((section) => [section, reason]));
}
