/**
 * The file store's turn at any length (`npm run bench -- --only=file-small-prompt`): the
 * small-prompt workload (bench/small-prompt.ts) loaded on the memory store, copied object for
 * object into a FileStore (lib/store/file.ts) in a temporary directory, then turns on both
 * through the service's per-request code with its view cache (bench/latency.ts's harness, no
 * added latency), in rounds that go through every size and both stores, so the machine's load
 * falls on all of them alike. Overhead = a turn's time before the model call plus after its
 * last token (its background pack settled between turns). The memory store runs the same
 * turns on the same objects: what the file store adds is the difference.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileStore } from '../lib/store/file.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { copyObjects } from '../test/support/copy-store.ts';
import { latencyHarness } from './latency.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { loadSmallPrompt } from './small-prompt.ts';
import { median } from './stats.ts';

export interface FileSmallPromptOptions {
  sizes: number[];
  /** Rounds over every size and store, after one warm-up round; turns per session a round. */
  rounds: number;
  turnsPerRound: number;
  seed: number;
  log: (line: string) => void;
}

export interface FileSmallPromptRow {
  items: number;
  /** Objects under the session's `turn/`, and how many of them are tombstones (empty). */
  recordObjects: number;
  tombstones: number;
  /** A list of the session's `turn/` with limit 3 (a turn's head read) on the file store: median ms. */
  headListMs: number;
  /** Overhead (ms): the median over the rounds of each round's median. */
  fileMs: number;
  memoryMs: number;
  /** CPU time of the process from request to response (ms, bench/latency.ts `cpuMs`), the same medians. */
  fileCpuMs: number;
  memoryCpuMs: number;
}

export interface FileSmallPromptFigures {
  rows: FileSmallPromptRow[];
  rounds: number;
  turnsPerRound: number;
  loadAverage: { start: string; end: string };
}

/** Lists of each session's records a size, interleaved across the sizes. */
const HEAD_LISTS = 200;

const loadAverage = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');

export async function measureFileSmallPrompt(options: FileSmallPromptOptions): Promise<FileSmallPromptFigures> {
  const start = loadAverage();
  const memory = new MemoryStore();
  const loader = new MemoryTurnDriver(memory);
  const ids = options.sizes.map((size) => `file_small_prompt_${size}`);
  const items: number[] = [];
  for (const [index, size] of options.sizes.entries())
    items.push((await loadSmallPrompt(loader, ids[index]!, size, { seed: options.seed, packEvery: 4 })).stored);
  const root = mkdtempSync(join(tmpdir(), 'tailgate-bench-file-'));
  try {
    const file = new FileStore(root);
    await copyObjects(memory, file);
    options.log(`file-small-prompt: ${items.join(', ')} items copied into the file store`);
    const stores: Record<'file' | 'memory', ObjectStore> = { file, memory };
    const harness = {
      file: latencyHarness(file, { delayMs: 0, modelMs: 0, turns: options.turnsPerRound }),
      memory: latencyHarness(memory, { delayMs: 0, modelMs: 0, turns: options.turnsPerRound }),
    };
    const overheads = ids.map(() => ({ file: [] as number[], memory: [] as number[] }));
    const cpu = ids.map(() => ({ file: [] as number[], memory: [] as number[] }));
    for (let round = 0; round <= options.rounds; round++) {
      for (const [index, id] of ids.entries()) {
        for (const store of ['file', 'memory'] as const) {
          const row = await harness[store].measure(id, options.sizes[index]!);
          // Round 0 warms the view caches and the file system's.
          if (round > 0) {
            overheads[index]![store].push(row.overheadMs);
            cpu[index]![store].push(row.cpuMs);
          }
        }
      }
      if (round > 0) options.log(`file-small-prompt: round ${round} of ${options.rounds}`);
    }
    const headLists = ids.map(() => [] as number[]);
    for (let round = 0; round < HEAD_LISTS; round++) {
      for (const [index, id] of ids.entries()) {
        const started = performance.now();
        await file.list(`sessions/${id}/turn/`, { limit: 3 });
        headLists[index]!.push(performance.now() - started);
      }
    }
    const rows: FileSmallPromptRow[] = [];
    for (const [index, id] of ids.entries()) {
      const listed = await listAll(stores.file, `sessions/${id}/turn/`);
      rows.push({
        items: items[index]!,
        recordObjects: listed.length,
        tombstones: listed.filter((size) => size === 0).length,
        headListMs: median(headLists[index]!),
        fileMs: median(overheads[index]!.file),
        memoryMs: median(overheads[index]!.memory),
        fileCpuMs: median(cpu[index]!.file),
        memoryCpuMs: median(cpu[index]!.memory),
      });
    }
    return {
      rows,
      rounds: options.rounds,
      turnsPerRound: options.turnsPerRound,
      loadAverage: { start, end: loadAverage() },
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

/** The sizes of every object under `prefix`. */
async function listAll(store: ObjectStore, prefix: string): Promise<number[]> {
  const sizes: number[] = [];
  for (let cursor: string | undefined, more = true; more; ) {
    const page = await store.list(prefix, cursor === undefined ? {} : { cursor });
    sizes.push(...page.objects.map((object) => object.size));
    more = page.truncated;
    cursor = page.cursor;
  }
  return sizes;
}

/** The table of RESULTS.md's section 11, file store part. */
export function fileSmallPromptSection(figures: FileSmallPromptFigures | undefined, notMeasured: string): string[] {
  const title = '### File store: the small-prompt turn at any length';
  if (!figures) return [title, '', `${notMeasured}.`, ''];
  const [first] = figures.rows;
  const ratio = (value: number, base: number) => (value / base).toFixed(2);
  return [
    title,
    '',
    'Command: `npm run bench -- --only=file-small-prompt` (bench/file-small-prompt.ts). The small-prompt ' +
      'workload, copied into a FileStore, turns with the view cache on (as a server runs them), in rounds over ' +
      'every size and both stores; overhead = time before the model call + after its last token, the median of ' +
      `${figures.rounds} rounds' medians of ${figures.turnsPerRound} turns each. ` +
      `Load average ${figures.loadAverage.start} at start, ` +
      `${figures.loadAverage.end} at end. Head listing: a list of the session's \`turn/\` with limit 3 (what a ` +
      `turn's head read asks), median of ${HEAD_LISTS}. CPU: the process's CPU time (every thread) from the ` +
      "request to the response, the same medians: the turn's own work, which waiting for a core or a disk " +
      'leaves out.',
    '',
    '| items | objects under turn/ (tombstones) | head listing ms | file p50 ms | ratio | memory p50 ms | ratio | ' +
      'file - memory ms | file CPU ms | ratio | memory CPU ms | ratio |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...figures.rows.map(
      (row) =>
        `| ${row.items.toLocaleString('en-US')} | ${row.recordObjects.toLocaleString('en-US')} ` +
        `(${row.tombstones.toLocaleString('en-US')}) | ${row.headListMs.toFixed(2)} | ` +
        `${row.fileMs.toFixed(1)} | ${ratio(row.fileMs, first!.fileMs)} | ` +
        `${row.memoryMs.toFixed(1)} | ${ratio(row.memoryMs, first!.memoryMs)} | ` +
        `${(row.fileMs - row.memoryMs).toFixed(1)} | ${row.fileCpuMs.toFixed(1)} | ` +
        `${ratio(row.fileCpuMs, first!.fileCpuMs)} | ${row.memoryCpuMs.toFixed(1)} | ` +
        `${ratio(row.memoryCpuMs, first!.memoryCpuMs)} |`,
    ),
    '',
  ];
}

/** The goal row: the file store's p50 ratio, largest size against the smallest. */
export function fileSmallPromptGoalRow(figures: FileSmallPromptFigures) {
  const first = figures.rows[0]!;
  const last = figures.rows.at(-1)!;
  const ratio = last.fileMs / first.fileMs;
  return {
    goal:
      `Per-turn p50 at ${last.items.toLocaleString('en-US')} items / p50 at ${first.items} items ` +
      '(file store, small-prompt workload, view cache on)',
    target: '<= 1.5',
    measured:
      `${ratio.toFixed(2)} (${first.fileMs.toFixed(1)} to ${last.fileMs.toFixed(1)} ms; memory store, same turns: ` +
      `${(last.memoryMs / first.memoryMs).toFixed(2)}; CPU time ${(last.fileCpuMs / first.fileCpuMs).toFixed(2)} ` +
      `on the file store, ${(last.memoryCpuMs / first.memoryCpuMs).toFixed(2)} on memory)`,
    met: ratio <= 1.5 ? 'yes' : '**no**',
  };
}

/** What `--quick` requires of the figures (bench/quick-check.ts): every size measured, the longest one packed. */
export function fileSmallPromptFailures(figures: FileSmallPromptFigures | undefined, sizes: number): string[] {
  if (figures?.rows.length !== sizes) return ['file-small-prompt: not every size measured'];
  const failures = figures.rows
    .filter((row) => ![row.fileMs, row.memoryMs, row.headListMs, row.fileCpuMs, row.memoryCpuMs].every((ms) => ms > 0))
    .map((row) => `file-small-prompt ${row.items}: a figure is missing`);
  if (figures.rows.at(-1)!.tombstones === 0) failures.push('file-small-prompt: the longest session has no tombstone');
  return failures;
}
