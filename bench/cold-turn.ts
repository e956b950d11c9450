/**
 * A cold first turn (`npm run bench -- --only=cold-turn`): per size, a session loaded through
 * `POST /v1/sessions/:id/items` in batches of 250 by one process (the app of functions/app.ts,
 * its background packing running after each response), which ends right after its last
 * answer: every storage call of its own it makes later fails, so the pack debt is what a fast
 * load leaves. Then turns each of a process new to the session (fresh services, no view cache),
 * their background packs not run, so each meets that debt; then turns of one process with the
 * service's view cache, warmed up (the warm p50 of the same run). Memory store, counted.
 */
import { createApp } from '../functions/app.ts';
import { DEFAULTS } from '../lib/defaults.ts';
import type { Item } from '../lib/items.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import { listAll, type ObjectStore } from '../lib/store/object-store.ts';
import { agentItems, type AgentSessionOptions } from './agent-session.ts';
import { appPoster, ENVIRONMENT } from './append-load.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { ProcessStore } from './process-store.ts';
import { alternatingTurns } from './small-prompt.ts';
import { median } from './stats.ts';

export interface ColdTurnOptions {
  sizes: number[];
  coldTurns: number;
  warmupTurns: number;
  warmTurns: number;
  seed: number;
  log?: (line: string) => void;
}

export interface ColdTurnRow {
  items: number;
  loadSeconds: number;
  /** When the cold turns began: records no segment covers, and records after the newest view. */
  debtRecords: number;
  recordsAfterView: number;
  /** The first cold turn (the load's debt and nothing else). */
  first: TurnFigures;
  /** The cold turns (each meets the debt, plus the records of the cold turns before it). */
  cold: TurnsSummary;
  /** A cold turn delivering 2 notices: its storage calls. */
  noticeOperations: number;
  /** Cold turns once the debt is packed, each its own pack run after it (as after its response). */
  packed: TurnsSummary;
  /** Turns of one process with the view cache, after warm-up. */
  warm: TurnsSummary;
}

interface TurnsSummary {
  operationsMax: number;
  budgetWorst: number;
  p50Ms: number;
}

interface TurnFigures {
  ms: number;
  operations: number;
  bytesRead: number;
  promptBytes: number;
  /** bytesRead / (1.1 x promptBytes + 64 KiB): goal <= 1. */
  budget: number;
}

const BATCH = 250;
const READ_BUDGET_SLACK = 64 * 1024;
/** Items as light as the append-load section's (outputs of 100 B to 2 KB), 5% of calls repeated. */
const ITEM_SIZES: Omit<AgentSessionOptions, 'seed'> = {
  outputBytes: [100, 2_000],
  argumentBytes: [20, 200],
  messageBytes: [50, 500],
};

export async function measureColdTurns(options: ColdTurnOptions): Promise<ColdTurnRow[]> {
  const rows: ColdTurnRow[] = [];
  for (const size of options.sizes) rows.push(await measureSize(size, options));
  return rows;
}

async function measureSize(size: number, options: ColdTurnOptions): Promise<ColdTurnRow> {
  const log = options.log ?? (() => undefined);
  const memory = new MemoryStore();
  const id = `cold_${size}`;
  const started = performance.now();
  await load(memory, id, size, options.seed, log);
  const loadSeconds = (performance.now() - started) / 1000;
  const debt = await debtOf(memory, id);
  log(`cold-turn ${size}: loaded in ${loadSeconds.toFixed(1)} s, debt ${debt.debtRecords} / ${debt.recordsAfterView}`);
  const turns = alternatingTurns();
  const coldTurns = async (count: number, runPacks: boolean) => {
    const figures: TurnFigures[] = [];
    for (let turn = 0; turn < count; turn++) figures.push(await measure(turns, coldDriver(memory, runPacks), id));
    return figures;
  };
  const cold = await coldTurns(options.coldTurns, false);
  const noticeDriver = coldDriver(memory, false);
  await noticeDriver.postNotice(id, 'build finished');
  await noticeDriver.postNotice(id, 'tests passed');
  const notice = await measure(turns, noticeDriver, id);
  // The debt packed, as the loading process's background would have done had it gone on;
  // then each cold turn's own pack runs after it, as it would after its response.
  await coldDriver(memory, true).pack(id);
  const packed = await coldTurns(options.coldTurns, true);
  const warmDriver = new MemoryTurnDriver(new ProcessStore(memory), { viewCacheBytes: DEFAULTS.viewCacheBytes });
  const warm: TurnFigures[] = [];
  for (let turn = 0; turn < options.warmupTurns + options.warmTurns; turn++) {
    const figures = await measure(turns, warmDriver, id);
    if (turn >= options.warmupTurns) warm.push(figures);
  }
  const row: ColdTurnRow = {
    items: size,
    loadSeconds,
    ...debt,
    first: cold[0]!,
    cold: summary(cold),
    noticeOperations: notice.operations,
    packed: summary(packed),
    warm: summary(warm),
  };
  log(
    `cold-turn ${size}: first cold turn ${row.first.operations} ops, budget ${row.first.budget.toFixed(2)}; ` +
      `p50 ${row.cold.p50Ms.toFixed(1)} ms cold, ${row.packed.p50Ms.toFixed(1)} ms cold after a pack, ` +
      `${row.warm.p50Ms.toFixed(1)} ms warm`,
  );
  return row;
}

/** The services of a process new to the session; `runPacks`: whether the packs its turns start run. */
function coldDriver(memory: MemoryStore, runPacks: boolean): MemoryTurnDriver {
  return new MemoryTurnDriver(new ProcessStore(memory), { viewCacheBytes: 0, runPacks });
}

function summary(turns: TurnFigures[]): TurnsSummary {
  return {
    operationsMax: Math.max(...turns.map((turn) => turn.operations)),
    budgetWorst: Math.max(...turns.map((turn) => turn.budget)),
    p50Ms: median(turns.map((turn) => turn.ms)),
  };
}

/** Loads `size` items into session `id` through the app, as one process that ends right after its last answer. */
async function load(
  memory: MemoryStore,
  id: string,
  size: number,
  seed: number,
  log: (line: string) => void,
): Promise<void> {
  const started = performance.now();
  const store = new ProcessStore(memory);
  const pending: Promise<unknown>[] = [];
  const context = { waitUntil: (task: Promise<unknown>) => pending.push(task), passThroughOnException: () => {} };
  const app = createApp({ store: () => store, readEnvironment: () => ENVIRONMENT, log: () => undefined });
  const post = appPoster(app, context);
  await post('/v1/sessions', { id });
  const source = agentItems({ seed, ...ITEM_SIZES });
  for (let stored = 0; stored < size; ) {
    const items: Item[] = [];
    while (items.length < Math.min(BATCH, size - stored) || items.at(-1)?.type === 'function_call')
      items.push(source.next().value as Item);
    await post(`/v1/sessions/${id}/items`, { items });
    // A line every 100,000 items: a load of a million takes many minutes.
    if (Math.floor((stored + items.length) / 100_000) > Math.floor(stored / 100_000))
      log(
        `cold-turn ${size}: ${stored + items.length} items in ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    stored += items.length;
  }
  store.end();
  await Promise.allSettled(pending);
}

/** Records no segment covers, and records after the newest view, from a listing. */
async function debtOf(store: ObjectStore, id: string): Promise<{ debtRecords: number; recordsAfterView: number }> {
  const objects = await listAll(store, `sessions/${id}/turn/`);
  const numberOf = (key: string) => 1e12 - Number(/\/(\d{12})[^/]*$/.exec(key)?.[1] ?? 1e12);
  const records = objects.filter((object) => /\/\d{12}$/.test(object.key));
  const newest = Math.max(0, ...records.map((object) => numberOf(object.key)));
  const views = objects.filter((object) => object.key.endsWith('.view')).map((object) => numberOf(object.key));
  return {
    debtRecords: records.filter((object) => object.size > 0).length,
    recordsAfterView: newest - Math.max(0, ...views),
  };
}

/** A turn of `driver`, the next of `turns`, and its figures. */
async function measure(
  turns: ReturnType<typeof alternatingTurns>,
  driver: MemoryTurnDriver,
  id: string,
): Promise<TurnFigures> {
  const driven = await turns(driver, id);
  const storage = driven.storage!;
  const promptBytes = driven.promptBytes!;
  return {
    ms: driven.ms,
    operations: storage.get + storage.head + storage.list + storage.put + storage.delete,
    bytesRead: storage.bytesRead,
    promptBytes,
    budget: storage.bytesRead / (1.1 * promptBytes + READ_BUDGET_SLACK),
  };
}

/** The section of RESULTS.md: one row per size. */
export function coldTurnSection(rows: ColdTurnRow[] | undefined, notMeasured: string): string[] {
  const title = '## A cold first turn after a fast load';
  if (!rows || rows.length === 0) return [title, '', `${notMeasured}.`, ''];
  const number = (value: number) => Math.round(value).toLocaleString('en-US');
  const turns = (summary: TurnsSummary) =>
    `${summary.operationsMax} / ${summary.budgetWorst.toFixed(2)} / ${summary.p50Ms.toFixed(1)}`;
  return [
    title,
    '',
    'Command: `npm run bench -- --only=cold-turn --cold-sizes=100,10000,100000,1000000` (bench/cold-turn.ts; ' +
      'the default sizes leave out 1,000,000, which loads for many minutes). Per size, a session loaded through ' +
      `POST /items in batches of ${BATCH} agent-like items (outputs of 100 B to 2 KB, 5% of calls repeated) by ` +
      'one process of the app (its background packing running after each response) that ends right after its ' +
      'last answer (its later storage calls fail), so the debt is what a fast load leaves: records outside ' +
      'segments / records after the newest view. Then, each in a new process (fresh services, no view cache, ' +
      'its background pack not run, so each meets the debt): cold turns, a cold turn delivering 2 notices; ' +
      'then one pack, as the loading process would have run had it gone on, and cold turns again, each in a new ' +
      'process whose pack runs after the turn (after a pack); then turns ' +
      'of one process with the view cache, after warm-up (warm). Turns alternate a request the echo model ' +
      'answers with a tool call and its output. Memory store, counted. Calls: storage calls until the response ' +
      '(goal <= 8; 8 + 4 per notice); budget: bytes read / (1.1 x prompt bytes + 64 KiB), worst turn (goal <= 1); ' +
      'ratio: the p50 of the cold turns to the warm p50 (goal <= 1.5).',
    '',
    '| items | load s | debt | first cold turn: calls / bytes read / budget | cold: calls max / budget / p50 ms | ' +
      'notice turn calls | cold after a pack: calls max / budget / p50 ms | warm: calls max / budget / p50 ms | ' +
      'ratio cold / after a pack |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (row) =>
        `| ${number(row.items)} | ${row.loadSeconds.toFixed(0)} | ${row.debtRecords} / ${row.recordsAfterView} | ` +
        `${row.first.operations} / ${kib(row.first.bytesRead)} / ${row.first.budget.toFixed(2)} | ` +
        `${turns(row.cold)} | ${row.noticeOperations} | ${turns(row.packed)} | ${turns(row.warm)} | ` +
        `${(row.cold.p50Ms / row.warm.p50Ms).toFixed(2)} / ${(row.packed.p50Ms / row.warm.p50Ms).toFixed(2)} |`,
    ),
    '',
  ];
}

function kib(bytes: number): string {
  return `${(bytes / 1024).toFixed(0)} KiB`;
}

/** The rows of "Goals at a glance" the section measures. */
export function coldTurnGoalRows(
  rows: ColdTurnRow[],
): { goal: string; target: string; measured: string; met: boolean }[] {
  if (rows.length === 0) return [];
  const at = (row: ColdTurnRow, value: string) => `${value} at ${row.items.toLocaleString('en-US')}`;
  const list = (value: (row: ColdTurnRow) => string) => rows.map((row) => at(row, value(row))).join(', ');
  return [
    {
      goal: 'Storage operations of a cold first turn after a fast load (a process new to the session, memory store)',
      target: '<= 8',
      measured: list((row) => String(row.first.operations)),
      met: rows.every((row) => row.first.operations <= 8),
    },
    {
      goal: 'Storage operations of a cold turn delivering notices after a fast load',
      target: '<= 8 + 4 per notice (16 for 2)',
      measured: list((row) => String(row.noticeOperations)),
      met: rows.every((row) => row.noticeOperations <= 16),
    },
    {
      goal: 'Bytes read by a cold first turn after a fast load / (1.1 x prompt bytes + 64 KiB)',
      target: '<= 1',
      measured: list((row) => row.first.budget.toFixed(2)),
      met: rows.every((row) => row.first.budget <= 1),
    },
    {
      goal: 'p50 of cold turns after a fast load / warm p50 (same run, memory store)',
      target: '<= 1.5',
      measured: list((row) => (row.cold.p50Ms / row.warm.p50Ms).toFixed(2)),
      met: rows.every((row) => row.cold.p50Ms / row.warm.p50Ms <= 1.5),
    },
  ];
}

/** The bullet of "Goals missed" when a cold first turn missed one of its goals. */
export function coldTurnCauses(rows: ColdTurnRow[]): string[] {
  const missed = coldTurnGoalRows(rows).filter((row) => !row.met);
  const largest = rows.at(-1);
  if (missed.length === 0 || !largest) return [];
  const size = largest.items.toLocaleString('en-US');
  const ratio = (row: ColdTurnRow) => row.cold.p50Ms / row.warm.p50Ms;
  const slowest = rows.reduce((worst, row) => (ratio(row) > ratio(worst) ? row : worst));
  const heaviest = rows.reduce((worst, row) => (row.first.budget > worst.first.budget ? row : worst));
  const at = (row: ColdTurnRow) => `at ${row.items.toLocaleString('en-US')} items`;
  return [
    `- **A cold first turn after a fast load** (${missed.length} of its 4 goals missed). ` +
      `At ${size} items the load left ${largest.recordsAfterView} records after the newest view (an append packs ` +
      'with a view once more than 8 would be, more than its record carries, or more item bytes than a tenth of ' +
      'the view and 64 KiB, and its record then carries none of them), and the first turn of a new ' +
      `process made ${largest.first.operations} storage calls (no repeat-index shard: the records after the view ` +
      `flag their calls' repeats) and read ${largest.first.budget.toFixed(2)}x the budget. What it reads beyond a ` +
      'warm turn is what the debt leaves after the newest view (docs/STORAGE.md, **What a cold turn reads**): the ' +
      "view, and the newest record's items and the records it carries, whole, of which a prompt holds the older " +
      `compacted: ${heaviest.first.budget.toFixed(2)}x the budget ${at(heaviest)}, where one record of 250 items ` +
      "is about a quarter of the prompt, and the view's repeat-index delta (48 KiB) takes most of what the 64 KiB " +
      "leaves. The cold turns after the first meet the earlier ones' records too: each turn's record flags the " +
      "calls of the turns it carries, so a turn reads a shard only for the newest turn's model calls, which its " +
      'completion flags when its process holds their shards or their shard filters in the view reject them (a ' +
      'read would be a round trip after the model; a view carries filters while its shards hold at most 65,536 ' +
      'keys): the notice turn, the sixth, makes ' +
      `${largest.noticeOperations} calls ${at(largest)}: the listings of the inbox and the log, the config, the ` +
      'view (and its chunk from 16 MiB), the newest record and its completion, the new record and completion, ' +
      'for each of its 2 notices a get, a head, a claim and a delete, and a shard where no ' +
      'filter spares it. Their time goes to ' +
      'what a warm turn takes parsed or hashed from its caches: parsing and checking the view (as large as the ' +
      'prompt without a context_limit), hashing the whole prompt for the receipt (which a real model answering ' +
      'for longer hides; the echo model answers at once), the call keys of the records after the view, and the ' +
      `garbage they leave: ${at(slowest)} their p50 is ${ratio(slowest).toFixed(2)}x the warm p50, ` +
      `${(slowest.packed.p50Ms / slowest.warm.p50Ms).toFixed(2)}x once a pack has written the view of the newest ` +
      'record.',
  ];
}
