/**
 * Export and import of a long session (`npm run bench -- --only=transfer`): in a child process
 * run with --expose-gc (this file, invoked directly), an export stream of the small-prompt
 * workload is imported (POST /v1/sessions/import's code path, lib/transfer.ts) into a
 * MemoryStore, then exported again; each is timed with its peak heap (heapUsed sampled every
 * millisecond and around every storage call, minus heapUsed after a full GC before it; the
 * store's bytes live outside the heap). Today's load path (appends of a block, packed every
 * 4, as bench/small-prompt.ts loads) is timed on `loadItems` items for the items-per-second
 * ratio.
 * Prints one JSON line (TransferFigures) on stdout.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { DEFAULTS } from '../lib/defaults.ts';
import { Inbox } from '../lib/inbox/inbox.ts';
import type { Item } from '../lib/items.ts';
import { sessionExistsIn } from '../lib/session/log/config-object.ts';
import { SessionLog } from '../lib/session/session-log.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { exportLines, importLines } from '../lib/transfer.ts';
import { viewPolicy } from '../lib/turn/view-policy.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { SamplingStore } from './memory-probe.ts';
import { smallPromptBlocks } from './small-prompt.ts';
import { runChildProbe } from './child-probe.ts';

export interface TransferOptions {
  items: number;
  loadItems: number;
  seed: number;
}

export interface TransferFigures extends TransferOptions {
  command: string;
  storedItems: number;
  importMs: number;
  importPeakBytes: number;
  /** The highest heapUsed after a full GC every LIVE_EVERY chunks of a second, untimed import, minus the baseline. */
  importLiveBytes: number;
  exportMs: number;
  exportPeakBytes: number;
  /** The same for a second, untimed export: what the export holds, its garbage collected. */
  exportLiveBytes: number;
  exportBytes: number;
  /** Whether the export's bytes are the imported stream's. */
  exact: boolean;
  loadedItems: number;
  loadMs: number;
  /** CPU time (user and system) of the process in the import and the load path (busy machines stretch wall time). */
  importCpuMs: number;
  loadCpuMs: number;
}

/** The command the figures come from. */
export function transferCommand(options: TransferOptions): string {
  return `node --expose-gc --import tsx bench/transfer.ts '${JSON.stringify(options)}'`;
}

/** Runs the probe in a child process (its own heap) and returns its figures. */
export function measureTransfer(options: TransferOptions): Promise<TransferFigures> {
  return runChildProbe(fileURLToPath(import.meta.url), ['--expose-gc'], options);
}

/**
 * The goal: an import at least 10x the load path when the goal was set (75 s per million items,
 * bench/RESULTS.md then), so at most 7.5 s per million items. The load path has got faster since;
 * the section also gives the ratio to it as it is now.
 */
const GOAL_MS_PER_MILLION = 7_500;
const FIRST_LOAD_PATH_MS_PER_MILLION = 75_000;

function importMsPerMillion(figures: TransferFigures): number {
  return (figures.importMs * 1_000_000) / figures.storedItems;
}

function importRatio(figures: TransferFigures): number {
  return (figures.storedItems / figures.importMs) * (figures.loadMs / figures.loadedItems);
}

function importMet(figures: TransferFigures): boolean {
  return importMsPerMillion(figures) <= GOAL_MS_PER_MILLION;
}

/** The goal row of RESULTS.md's table. */
export function transferGoalRow(figures: TransferFigures) {
  const perMillion = importMsPerMillion(figures);
  return {
    goal:
      `Import of ${figures.storedItems.toLocaleString('en-US')} items: at least 10x the load path's 75 s per ` +
      'million items (at most 7.5 s)',
    target: '<= 7.5 s',
    measured:
      `${(perMillion / 1000).toFixed(2)} s per million items: ` +
      `${(FIRST_LOAD_PATH_MS_PER_MILLION / perMillion).toFixed(1)}x; ${importRatio(figures).toFixed(1)}x the ` +
      `load path as it is now, on ${figures.loadedItems.toLocaleString('en-US')} items`,
    met: importMet(figures) ? 'yes' : '**no**',
  };
}

/** Why the goal was missed, for RESULTS.md's list (empty when met). */
export function transferCauses(figures: TransferFigures | undefined): string[] {
  if (!figures || importMet(figures)) return [];
  return [
    `- **Import speed.** ${(importMsPerMillion(figures) / 1000).toFixed(2)} s per million items (goal 7.5 s). An ` +
      'import parses and validates every line (the item schemas, seqs, open calls, sizes) and writes it ' +
      'into a segment as it came, hashes each call key once for a view made in memory every 16 segments, ' +
      'and stores one view at the end. It saves the load path its per-append round trips, records and ' +
      'views, not the per-item parsing and validation; see section 8.',
  ];
}

/** RESULTS.md's section. */
export function transferSection(figures: TransferFigures | undefined, notMeasured: string): string[] {
  const title = '## 8. Export and import of a long session';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  const rate = (items: number, ms: number) => Math.round((items * 1000) / ms).toLocaleString('en-US');
  return [
    title,
    '',
    `Command: \`${figures.command}\` (bench/transfer.ts). The small-prompt workload's items as an export ` +
      'stream, imported through lib/transfer.ts (what POST /v1/sessions/import runs) into a memory store, ' +
      'then exported (GET /v1/sessions/{id}/export) to a counting sink; peak heap = highest heapUsed sampled ' +
      'every millisecond and around every storage call ' +
      'minus heapUsed after a full GC before (the store holds its bytes outside the heap), garbage included; ' +
      `live heap = the highest heapUsed right after a full GC every ${LIVE_EVERY} chunks, in a second, untimed ` +
      'pass: what the import or export holds. Load path: appends of a block packed every 4, as section 5 loads.',
    '',
    '| items | import s | import items/s | import peak / live heap | export s | export peak / live heap | ' +
      'export bytes | export = imported stream |',
    '|---|---|---|---|---|---|---|---|',
    `| ${figures.storedItems.toLocaleString('en-US')} | ${(figures.importMs / 1000).toFixed(1)} | ` +
      `${rate(figures.storedItems, figures.importMs)} | ` +
      `${mib(figures.importPeakBytes)} / ${mib(figures.importLiveBytes)} | ` +
      `${(figures.exportMs / 1000).toFixed(1)} | ${mib(figures.exportPeakBytes)} / ${mib(figures.exportLiveBytes)} | ` +
      `${mib(figures.exportBytes)} | ${figures.exact ? 'yes' : '**no**'} |`,
    '',
    `Load path on ${figures.loadedItems.toLocaleString('en-US')} items: ${(figures.loadMs / 1000).toFixed(1)} s, ` +
      `${rate(figures.loadedItems, figures.loadMs)} items/s. Import / load path: ` +
      `${importRatio(figures).toFixed(1)}x. The goal: at most 7.5 s per million items imported.`,
    '',
    'CPU time of the process (user and system), which a busy machine does not stretch as it does wall time: ' +
      `import ${(figures.importCpuMs / 1000).toFixed(1)} s ` +
      `(${rate(figures.storedItems, figures.importCpuMs)} items/s), ` +
      `load path ${(figures.loadCpuMs / 1000).toFixed(1)} s ` +
      `(${rate(figures.loadedItems, figures.loadCpuMs)} items/s): ` +
      `${((figures.storedItems / figures.importCpuMs) * (figures.loadCpuMs / figures.loadedItems)).toFixed(1)}x.`,
    '',
  ];
}

const AT = '2026-01-01T00:00:00.000Z';
/** Chunks (64 KiB of the import's stream, or export yields) between full GCs of a live-heap pass. */
const LIVE_EVERY = 32;

/** The stream's chunks: about this many bytes each. */
const CHUNK_BYTES = 64 * 1024;
/** Distinct blocks the stream cycles through (their calls are answered within the block, so a repeat is valid). */
const CYCLE_BLOCKS = 16;

/**
 * The export stream of `items` items of the workload, in chunks of about 64 KiB, hashed as it
 * goes when `hash` is given (in the untimed pass). The items' JSON is encoded once for
 * CYCLE_BLOCKS blocks and copied into each chunk with new seqs, so the stream costs the timed
 * import about what bytes arriving from a socket would: a new buffer a chunk, filled by copies.
 */
async function* exportStream(
  options: TransferOptions,
  hash: ReturnType<typeof createHash> | null,
  onChunk: () => void = () => undefined,
): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  const header = {
    type: 'session',
    format: 'tailgate.export.v1',
    id: 'transfer',
    created_at: AT,
    instructions: 'You are a coding agent working through a large repository.',
    model: null,
    strategies: null,
    strategy_config: {},
    tools: [],
    metadata: {},
  };
  const blocks = smallPromptBlocks(options.seed);
  const cycle = Array.from({ length: CYCLE_BLOCKS }, () =>
    (blocks.next().value as Item[]).map((item) => encoder.encode(`${JSON.stringify(item).slice(0, -1)},"seq":`)),
  );
  const end = encoder.encode(`,"created_at":"${AT}"}\n`);
  const longest = Math.max(...cycle.flat().map((bytes) => bytes.length)) + 16 + end.length;
  let chunk = encoder.encode(`${JSON.stringify(header)}\n`);
  let offset = chunk.length;
  const emit = () => {
    const bytes = chunk.subarray(0, offset);
    hash?.update(bytes);
    onChunk();
    chunk = new Uint8Array(CHUNK_BYTES + longest);
    offset = 0;
    return bytes;
  };
  yield emit();
  let seq = 0;
  // Whole blocks (a block's calls are answered within it), a chunk sent whenever one is full.
  for (let block = 0; seq < options.items; block++) {
    for (const item of cycle[block % CYCLE_BLOCKS]!) {
      chunk.set(item, offset);
      offset += item.length;
      const digits = String(++seq);
      for (let index = 0; index < digits.length; index++) chunk[offset++] = digits.charCodeAt(index);
      chunk.set(end, offset);
      offset += end.length;
      if (offset >= CHUNK_BYTES) yield emit();
    }
  }
  if (offset > 0) yield emit();
}

async function probe(options: TransferOptions): Promise<Omit<TransferFigures, 'command'>> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  let peak = 0;
  let sampling = false;
  const sample = () => {
    if (!sampling) return;
    const used = process.memoryUsage().heapUsed;
    if (used > peak) peak = used;
  };
  const measure = async (task: () => Promise<void>) => {
    gc();
    gc();
    const baseline = process.memoryUsage().heapUsed;
    peak = baseline;
    sampling = true;
    const timer = setInterval(sample, 1);
    const start = performance.now();
    const cpu = process.cpuUsage();
    await task();
    const ms = performance.now() - start;
    const cpuMs = cpuMsSince(cpu);
    clearInterval(timer);
    sampling = false;
    return { ms, cpuMs, peakBytes: peak - baseline };
  };
  const store = new SamplingStore(new MemoryStore(), sample);
  const sessions = new SessionLog(store, { viewPolicy });
  const services = { sessions, inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }), env: {} };
  const sent = createHash('sha256');
  let storedItems = 0;
  const imported = await measure(async () => {
    const session = await importLines(services, exportStream(options, null), {
      maxItemBytes: DEFAULTS.maxItemBytes,
      maxNoticeBytes: DEFAULTS.maxNoticeBytes,
      maxLineBytes: DEFAULTS.maxBodyBytes,
    });
    storedItems = session.counts.items;
  });
  const received = createHash('sha256');
  let exportBytes = 0;
  const exported = await measure(async () => {
    for await (const lines of await exportLines(services, 'transfer')) {
      exportBytes += Buffer.byteLength(lines);
      received.update(lines);
    }
  });
  // The live heap: a full GC every LIVE_EVERY chunks, in passes of their own (not timed).
  let live = 0;
  let chunks = 0;
  const liveSample = (baseline: number) => () => {
    if (++chunks % LIVE_EVERY !== 0) return;
    gc();
    live = Math.max(live, process.memoryUsage().heapUsed - baseline);
  };
  const liveHeap = async (pass: (sample: () => void) => Promise<unknown>) => {
    gc();
    gc();
    live = 0;
    chunks = 0;
    await pass(liveSample(process.memoryUsage().heapUsed));
    return live;
  };
  const exportLiveBytes = await liveHeap(async (sampleLive) => {
    for await (const _lines of await exportLines(services, 'transfer')) sampleLive();
  });
  await sessions.delete('transfer');
  const importLiveBytes = await liveHeap((sampleLive) =>
    // The same stream again: hashed here, for the check that the export gave its bytes.
    importLines(services, exportStream(options, sent, sampleLive), {
      maxItemBytes: DEFAULTS.maxItemBytes,
      maxNoticeBytes: DEFAULTS.maxNoticeBytes,
      maxLineBytes: DEFAULTS.maxBodyBytes,
    }),
  );
  const driver = new MemoryTurnDriver();
  await driver.createSession('load', 'You are a coding agent working through a large repository.');
  const blocks = smallPromptBlocks(options.seed);
  let loadedItems = 0;
  let appends = 0;
  const start = performance.now();
  const loadCpu = process.cpuUsage();
  while (loadedItems < options.loadItems) {
    loadedItems = await driver.append('load', blocks.next().value as Item[]);
    if (++appends % 4 === 0) await driver.pack('load');
  }
  await driver.pack('load');
  const loadMs = performance.now() - start;
  const loadCpuMs = cpuMsSince(loadCpu);
  return {
    ...options,
    storedItems,
    importMs: imported.ms,
    importPeakBytes: imported.peakBytes,
    importLiveBytes,
    exportMs: exported.ms,
    exportPeakBytes: exported.peakBytes,
    exportLiveBytes,
    exportBytes,
    exact: sent.digest('hex') === received.digest('hex'),
    loadedItems,
    loadMs,
    importCpuMs: imported.cpuMs,
    loadCpuMs,
  };
}

/** User and system CPU milliseconds of this process since `start`. */
function cpuMsSince(start: NodeJS.CpuUsage): number {
  const { user, system } = process.cpuUsage(start);
  return (user + system) / 1000;
}

const invokedDirectly = process.argv[1] !== undefined && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/'));
if (invokedDirectly) {
  const options = JSON.parse(process.argv[2] ?? '{}') as TransferOptions;
  probe(options).then(
    (figures) => process.stdout.write(`${JSON.stringify({ ...figures, command: transferCommand(options) })}\n`),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
