import type { Item } from '../lib/items.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import type { TurnRequest } from '../lib/turn/index.ts';
import { TextSource } from './agent-session.ts';
import { latencyHarness, type LatencyRow } from './latency.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { SeededRandom } from './random.ts';
import { median, percentile } from './stats.ts';
import { READ_FILE_TOOL, type DrivenTurn } from './turn-driver.ts';

/**
 * What a turn reads against what it sends, on a long agent session whose prompt stays small:
 * blocks of a user message, 50 tool pairs (distinct calls, outputs of 1 to 3 KB) and an
 * assistant message, with the default strategies on the memory store (counted). The goal:
 * bytes read per turn <= 1.1 x prompt bytes + 64 KiB (read budget <= 1), at any length.
 */

export interface SmallPromptOptions {
  sizes: number[];
  measuredTurns: number;
  warmupTurns: number;
  seed: number;
  /** Pack after every this many appended blocks while loading (as turns would). */
  packEvery: number;
  /** Then the turns' overhead with every storage call `delayMs` slower (bench/latency.ts). */
  latency?: { delayMs: number; modelMs: number; turns: number };
  log?: (line: string) => void;
}

export interface SmallPromptRow {
  size: number;
  /** Items stored when the measured turns began. */
  itemsAtStart: number;
  loadMs: number;
  turns: number;
  bytesReadMedian: number;
  bytesReadMax: number;
  promptBytesMedian: number;
  /** Worst bytes read / (1.1 x prompt bytes + 64 KiB) over the measured turns (goal <= 1). */
  readBudgetWorst: number;
  /** Storage calls of a turn until its response (median and worst). */
  operationsMedian: number;
  operationsMax: number;
  getsMedian: number;
  p50Ms: number;
  p95Ms: number;
  /**
   * Through the DepthStore: with the service's view cache (`warm`: the process has seen the
   * session) and without one (`cold`: every turn fetches and parses its view).
   */
  latency?: { warm: LatencyRow; cold: LatencyRow };
}

export const TOOL_PAIRS_PER_BLOCK = 50;
const READ_BUDGET_SLACK = 64 * 1024;

/** The workload's blocks, deterministic for a seed. */
export function* smallPromptBlocks(seed: number): Generator<Item[]> {
  const random = new SeededRandom(seed);
  const text = new TextSource(random, 1 << 16);
  for (let block = 0; ; block++) {
    const items: Item[] = [{ type: 'message', role: 'user', content: `Task ${block}: ${text.text(200)}` }];
    for (let pair = 0; pair < TOOL_PAIRS_PER_BLOCK; pair++) {
      const callId = `call_${block}_${pair}`;
      const path = `src/module${block}/file${pair}.ts`;
      items.push({ type: 'function_call', call_id: callId, name: 'read_file', arguments: JSON.stringify({ path }) });
      items.push({ type: 'function_call_output', call_id: callId, output: text.text(random.integer(1000, 3000)) });
    }
    items.push({ type: 'message', role: 'assistant', content: text.text(300) });
    yield items;
  }
}

/**
 * Loads one session per size (appending whole blocks, packing as turns would), then measures
 * turns: bytes read through a counting driver without a view cache, then, with `latency`,
 * the overhead through a DepthStore over the same memory store, warm and cold.
 */
export async function benchSmallPrompt(options: SmallPromptOptions): Promise<SmallPromptRow[]> {
  const log = options.log ?? (() => undefined);
  const memory = new MemoryStore();
  const driver = new MemoryTurnDriver(memory);
  const harness = options.latency && {
    warm: latencyHarness(memory, options.latency),
    cold: latencyHarness(memory, { ...options.latency, viewCacheBytes: 0 }),
  };
  const rows: SmallPromptRow[] = [];
  for (const size of options.sizes) {
    const id = `small_prompt_${size}`;
    const { stored, loadMs } = await loadSmallPrompt(driver, id, size, options);
    const row = await measureTurns(driver, id, size, stored, loadMs, options);
    if (harness) {
      const cold = await harness.cold.measure(id, size);
      const warm = await harness.warm.measure(id, size);
      row.latency = { warm, cold };
      log(
        `small-prompt ${size}: overhead ${warm.overheadMs.toFixed(0)} ms warm, ${cold.overheadMs.toFixed(0)} ms cold`,
      );
    }
    rows.push(row);
  }
  await driver.close();
  return rows;
}

/**
 * Creates session `id` and appends whole blocks until it holds at least `size` items, packing
 * every `packEvery` records as turns would.
 */
export async function loadSmallPrompt(
  driver: MemoryTurnDriver,
  id: string,
  size: number,
  options: Pick<SmallPromptOptions, 'seed' | 'packEvery' | 'log'>,
): Promise<{ stored: number; loadMs: number }> {
  const log = options.log ?? (() => undefined);
  await driver.createSession(id, 'You are a coding agent working through a large repository.');
  const start = performance.now();
  const blocks = smallPromptBlocks(options.seed);
  let stored = 0;
  let appended = 0;
  // A record per block up to 100,000 items; beyond, 10 blocks a record, so loading writes a
  // tenth of the views (each as large as the prompt) and takes minutes, not an hour.
  const blocksPerRecord = size > 100_000 ? 10 : 1;
  while (stored < size) {
    const items: Item[] = [];
    for (let block = 0; block < blocksPerRecord; block++) items.push(...(blocks.next().value as Item[]));
    stored = await driver.append(id, items);
    if (++appended % options.packEvery === 0) await driver.pack(id);
    if (appended % 1000 === 0) log(`small-prompt ${size}: ${stored} items stored`);
  }
  await driver.pack(id);
  const loadMs = performance.now() - start;
  log(`small-prompt ${size}: loaded ${stored} items in ${(loadMs / 1000).toFixed(1)} s`);
  return { stored, loadMs };
}

async function measureTurns(
  driver: MemoryTurnDriver,
  id: string,
  size: number,
  itemsAtStart: number,
  loadMs: number,
  options: SmallPromptOptions,
): Promise<SmallPromptRow> {
  const measured: { ms: number; bytesRead: number; promptBytes: number; operations: number; gets: number }[] = [];
  const next = alternatingTurns();
  for (let turn = 0; turn < options.warmupTurns + options.measuredTurns; turn++) {
    const driven = await next(driver, id);
    if (turn < options.warmupTurns) continue;
    const storage = driven.storage!;
    measured.push({
      ms: driven.ms,
      bytesRead: storage.bytesRead,
      promptBytes: driven.promptBytes!,
      operations: storage.get + storage.head + storage.list + storage.put + storage.delete,
      gets: storage.get,
    });
  }
  const of = (pick: (turn: (typeof measured)[number]) => number) => measured.map(pick);
  return {
    size,
    itemsAtStart,
    loadMs,
    turns: measured.length,
    bytesReadMedian: median(of((turn) => turn.bytesRead)),
    bytesReadMax: Math.max(...of((turn) => turn.bytesRead)),
    promptBytesMedian: median(of((turn) => turn.promptBytes)),
    readBudgetWorst: Math.max(...of((turn) => turn.bytesRead / (1.1 * turn.promptBytes + READ_BUDGET_SLACK))),
    operationsMedian: median(of((turn) => turn.operations)),
    operationsMax: Math.max(...of((turn) => turn.operations)),
    getsMedian: median(of((turn) => turn.gets)),
    p50Ms: median(of((turn) => turn.ms)),
    p95Ms: percentile(
      of((turn) => turn.ms),
      95,
    ),
  };
}

/**
 * Turns as an agent's alternate, whichever driver runs each: a request the echo model answers
 * with a tool call, then the tool's output, so the calls after the newest view are looked up
 * in the repeat index.
 */
export function alternatingTurns(): (driver: MemoryTurnDriver, id: string) => Promise<DrivenTurn> {
  let pendingCall: string | undefined;
  let turn = 0;
  return async (driver, id) => {
    const input: TurnRequest['input'] = pendingCall
      ? [{ type: 'function_call_output', call_id: pendingCall, output: `contents of step ${turn}\n`.repeat(100) }]
      : `call read_file {"path":"src/step-${turn}.ts"}`;
    turn += 1;
    const driven = await driver.turn(id, { input, tools: [READ_FILE_TOOL] });
    const call = driven.response.output.find((item) => item.type === 'function_call');
    pendingCall = pendingCall ? undefined : call?.type === 'function_call' ? call.call_id : undefined;
    return driven;
  };
}

/** The section of RESULTS.md: one row per size. */
/** `notMeasured`: what the section says when it was not run ("Not measured (...)"). */
export function smallPromptMarkdown(
  rows: SmallPromptRow[] | undefined,
  command: string,
  notMeasured: string,
): string[] {
  const lines = [
    '## Small prompt, long history: bytes read per turn',
    '',
    `Command: \`${command}\` (bench/small-prompt.ts)`,
    '',
  ];
  if (!rows) return [...lines, `${notMeasured}.`, ''];
  lines.push(
    `Blocks of a user message, ${TOOL_PAIRS_PER_BLOCK} tool pairs (distinct calls, outputs of 1 to 3 KB) ` +
      'and an assistant message, ' +
      'appended a block per record (10 blocks per record above 100,000 items) and packed every few records; ' +
      'then turns alternating a request the echo model answers with a tool call and its output; ' +
      'default strategies, memory store (counted). ' +
      'Read budget = bytes read / (1.1 x prompt bytes + 64 KiB), worst measured turn (goal <= 1). ' +
      'Storage calls until the response.',
    '',
    '| items | load s | turns | bytes read (median / max) | prompt bytes | read budget | ' +
      'storage calls (median / max) | gets | p50 ms | p95 ms |',
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const row of rows)
    lines.push(
      `| ${row.itemsAtStart.toLocaleString('en-US')} | ${(row.loadMs / 1000).toFixed(0)} | ${row.turns} | ` +
        `${kb(row.bytesReadMedian)} / ${kb(row.bytesReadMax)} | ` +
        `${kb(row.promptBytesMedian)} | ${row.readBudgetWorst.toFixed(2)} | ` +
        `${row.operationsMedian} / ${row.operationsMax} | ${row.getsMedian} | ` +
        `${row.p50Ms.toFixed(1)} | ${row.p95Ms.toFixed(1)} |`,
    );
  lines.push('');
  const timed = rows.filter((row) => row.latency);
  const first = timed[0]?.latency;
  if (!first) return lines;
  const ratio = (row: LatencyRow, base: LatencyRow) => (row.overheadMs / base.overheadMs).toFixed(2);
  lines.push(
    `Then the same sessions through a store whose every call takes ${first.warm.delayMs} ms more ` +
      `(bench/latency.ts; the echo model answers after ${first.warm.modelMs} ms): ` +
      'overhead = time before the model call + time after its last token, median over the turns ' +
      '(every other one streamed), and its ratio to the smallest size. ' +
      '"warm": the service as configured (VIEW_CACHE_BYTES default), the process has seen the session, ' +
      'so a turn takes its view parsed from the view cache; "cold": no view cache, every turn fetches and parses ' +
      'its view, as a process new to the session does (measured first).',
    '',
    '| items | warm: overhead ms | ratio | before / after ms | rounds before / after | ' +
      'cold: overhead ms | ratio | before / after ms |',
    '|---|---|---|---|---|---|---|---|',
  );
  for (const row of timed) {
    const { warm, cold } = row.latency!;
    lines.push(
      `| ${row.itemsAtStart.toLocaleString('en-US')} | ${warm.overheadMs.toFixed(0)} | ${ratio(warm, first.warm)} | ` +
        `${warm.beforeModelMs.toFixed(0)} / ${warm.afterModelMs.toFixed(0)} | ` +
        `${warm.depthBeforeModel} / ${warm.depthAfterModel} | ` +
        `${cold.overheadMs.toFixed(0)} | ${ratio(cold, first.cold)} | ` +
        `${cold.beforeModelMs.toFixed(0)} / ${cold.afterModelMs.toFixed(0)} |`,
    );
  }
  lines.push('');
  return lines;
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}
