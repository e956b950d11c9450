import type { Item } from '../lib/items.ts';
import type { StoreCounts } from '../test/support/counting-store.ts';
import type { TurnRequest } from '../lib/turn/index.ts';
import { agentItems, TextSource } from './agent-session.ts';
import { SeededRandom } from './random.ts';
import { summarize } from './recording-store.ts';
import { median, percentile } from './stats.ts';
import { READ_FILE_TOOL, type DrivenTurn, type TurnDriver } from './turn-driver.ts';

export interface TurnOverheadOptions {
  /** Stored items to measure at, ascending; one session per size, measured round by round. */
  sizes: number[];
  /** Measured turns per size (a number, or one per size). */
  measuredTurns: number | ((size: number) => number);
  warmupTurns: number;
  seed: number;
  /** Items per POST /items while loading. */
  appendBatch: number;
  /** Pack after every this many appends while loading (a short turn where the driver cannot pack directly). */
  turnEveryAppends: number;
  /** Notices posted before the notice turn. */
  notices: number;
  /** Do not load a size whose projected load time exceeds what is left of this. */
  loadBudgetMs?: number;
  log?: (line: string) => void;
}

export interface StorageFigures {
  /** Operations per turn (the turn's own, until the response). */
  operationsMedian: number;
  operationsMax: number;
  /** Median per operation kind. */
  breakdown: Omit<StoreCounts, 'bytesRead' | 'bytesWritten'>;
  bytesReadMedian: number;
  bytesReadMax: number;
  /** Where the driver reports the prompt (the memory store; not workerd). */
  promptBytesMedian?: number;
  /**
   * Worst bytesRead / (1.1 x promptBytes + 64 KiB) over the measured turns (goal <= 1); prompt
   * characters where the driver reports no bytes.
   */
  readBudgetWorst?: number;
  /**
   * Background (packing) operations per turn, averaged over the measured turns, where the driver
   * counts them apart (the memory store).
   */
  backgroundOperationsPerTurn?: number;
  /**
   * Where the operations and bytes go: median count and bytes per turn by operation and key kind
   * (empty where calls are not recorded).
   */
  byKind: { label: string; count: number; bytes: number }[];
}

export interface NoticeTurnFigures {
  ms: number;
  delivered: number;
  operations?: number;
  /** 8 + 4 x delivered. */
  operationsLimit: number;
}

export interface TurnOverheadRow {
  runtime: string;
  size: number;
  /** Stored items when the measured turns began. */
  itemsAtStart: number;
  loadMs: number;
  turns: number;
  p50Ms: number;
  p95Ms: number;
  /** p50 / p50 at the first size of the same runtime. */
  ratio: number;
  promptCharactersMedian: number;
  itemsInPromptMedian: number;
  storage?: StorageFigures;
  /** Median storage operations (and puts) of one POST /items while loading this size. */
  append?: { items: number; operations: number; puts: number; byKind: { label: string; count: number }[] };
  notice?: NoticeTurnFigures;
  /** GET /items of the newest 100 items after the measured turns: operations and bytes read. */
  newestPage?: { operations: number; bytesRead: number };
  /** `not measured (why)`: the load budget, or what failed. */
  skipped?: string;
}

const READ_BUDGET_SLACK = 64 * 1024;

/** One size's session while the sizes are measured side by side. */
interface SizeRun {
  size: number;
  id: string;
  stored: number;
  itemsAtStart: number;
  loadMs: number;
  appendsBefore: number;
  appendsAfter: number;
  turnsWanted: number;
  turnsTaken: number;
  pendingCall?: string | undefined;
  measured: DrivenTurn[];
  /** Why the size has no row of figures (loading or a turn failed, or the load budget). */
  notMeasured?: string;
}

/**
 * Per-turn overhead with the echo model at several history sizes on one runtime: one session
 * per size, each loaded with an agent-like history (POST /items in batches, a short turn
 * every few appends so the log packs as it would in use); then the turns are timed round by
 * round, one turn of every size per round, so load on the machine falls on every size alike.
 * The turns alternate a user message asking for a tool call and the tool's output; last, each
 * session takes one turn that delivers notices. A size that is not measured keeps its row,
 * saying why.
 */
export async function benchTurnOverhead(driver: TurnDriver, options: TurnOverheadOptions): Promise<TurnOverheadRow[]> {
  const log = options.log ?? (() => undefined);
  const random = new SeededRandom(options.seed + 1);
  const text = new TextSource(random, 1 << 16);
  const source = agentItems({ seed: options.seed });
  const runs: SizeRun[] = [];
  let loadMsTotal = 0;
  let loadedItems = 0;
  let failure: string | undefined;
  const started = performance.now();

  for (const size of options.sizes) {
    const id = `bench_${driver.runtime}_${size}`;
    const run: SizeRun = {
      size,
      id,
      stored: 0,
      itemsAtStart: 0,
      loadMs: 0,
      appendsBefore: 0,
      appendsAfter: 0,
      turnsWanted: 0,
      turnsTaken: 0,
      measured: [],
    };
    runs.push(run);
    if (failure) {
      run.notMeasured = `not measured (${failure}, at a smaller size)`;
      continue;
    }
    if (options.loadBudgetMs !== undefined && loadedItems > 0) {
      const projected = (size / loadedItems) * loadMsTotal;
      const left = options.loadBudgetMs - (performance.now() - started);
      if (projected > left) {
        run.notMeasured =
          `not measured (loading ${size.toLocaleString('en-US')} items would take about ` +
          `${(projected / 1000).toFixed(0)} s at the rate so far ` +
          `(${((loadedItems / loadMsTotal) * 1000).toFixed(0)} items/s), more than the ` +
          `${(Math.max(0, left) / 1000).toFixed(0)} s left of the load budget)`;
        log(`${driver.runtime} ${size}: ${run.notMeasured}`);
        continue;
      }
    }
    try {
      await driver.createSession(id, text.text(1_000));
      const loadStart = performance.now();
      run.appendsBefore = driver.appendCounts?.length ?? 0;
      await loadHistory(driver, id, size, source, options, (stored) => (run.stored = stored));
      run.appendsAfter = driver.appendCounts?.length ?? 0;
      run.loadMs = performance.now() - loadStart;
      run.itemsAtStart = run.stored;
      run.turnsWanted =
        options.warmupTurns +
        (typeof options.measuredTurns === 'number' ? options.measuredTurns : options.measuredTurns(size));
      loadMsTotal += run.loadMs;
      loadedItems += run.stored;
      log(`${driver.runtime} ${size}: loaded ${run.stored} items in ${(run.loadMs / 1000).toFixed(1)} s`);
    } catch (error) {
      // A runtime that fails at some size (e.g. out of memory) still reports the sizes before it.
      failure = `loading failed with ${run.stored.toLocaleString('en-US')} items stored: ${describe(error)}`;
      run.notMeasured = `not measured (${failure})`;
      log(`${driver.runtime} ${size}: ${run.notMeasured}`);
    }
  }

  // Round by round: one turn of every size still measuring.
  for (let round = 0; ; round++) {
    const due = runs.filter((run) => !run.notMeasured && run.turnsTaken < run.turnsWanted);
    if (due.length === 0) break;
    for (const run of due) {
      try {
        const request: TurnRequest = run.pendingCall
          ? {
              input: [{ type: 'function_call_output', call_id: run.pendingCall, output: text.text(2_000) }],
              tools: [READ_FILE_TOOL],
            }
          : { input: `call read_file {"path":"src/bench-${round}.ts"}`, tools: [READ_FILE_TOOL] };
        const turn = await driver.turn(run.id, request);
        const call = turn.response.output.find((item) => item.type === 'function_call');
        run.pendingCall = run.pendingCall ? undefined : call?.type === 'function_call' ? call.call_id : undefined;
        run.stored = lastSeq(turn.response, run.stored);
        if (run.turnsTaken >= options.warmupTurns) run.measured.push(turn);
        run.turnsTaken++;
      } catch (error) {
        run.notMeasured = `not measured (turn ${run.turnsTaken + 1} failed: ${describe(error)})`;
        log(`${driver.runtime} ${run.size}: ${run.notMeasured}`);
      }
    }
  }

  const rows: TurnOverheadRow[] = [];
  for (const run of runs) {
    if (run.notMeasured) {
      rows.push(emptyRow(driver.runtime, run.size, run.stored, run.notMeasured));
      continue;
    }
    try {
      rows.push(await finishRow(driver, run, options, text, log));
    } catch (error) {
      const reason = `not measured (the notice turn failed: ${describe(error)})`;
      log(`${driver.runtime} ${run.size}: ${reason}`);
      rows.push(emptyRow(driver.runtime, run.size, run.stored, reason));
    }
  }
  const first = rows.find((row) => !row.skipped);
  for (const row of rows) row.ratio = first && !row.skipped ? row.p50Ms / first.p50Ms : Number.NaN;
  return rows;
}

/**
 * Loads `size` agent-like items into session `id`: POST /items in batches of `appendBatch`,
 * packing (or, where the driver cannot pack, a short turn) every `turnEveryAppends` appends,
 * and once more at the end so the background work catches up. `progress` hears the last seq
 * after every write.
 */
export async function loadHistory(
  driver: TurnDriver,
  id: string,
  size: number,
  source: Iterator<unknown>,
  options: Pick<TurnOverheadOptions, 'appendBatch' | 'turnEveryAppends'>,
  progress: (stored: number) => void = () => undefined,
): Promise<number> {
  let stored = 0;
  let appendsSinceTurn = 0;
  while (stored < size) {
    const batch: Item[] = [];
    while (batch.length < Math.min(options.appendBatch, size - stored) || batch.at(-1)?.type === 'function_call') {
      batch.push(source.next().value as Item);
    }
    stored = await driver.append(id, batch);
    progress(stored);
    if (++appendsSinceTurn >= options.turnEveryAppends) {
      appendsSinceTurn = 0;
      if (driver.pack) await driver.pack(id);
      else stored = lastSeq((await driver.turn(id, { input: 'continue' })).response, stored);
      progress(stored);
    }
  }
  if (driver.pack) await driver.pack(id);
  return stored;
}

/** After the measured turns: the open call answered, the notice turn, the newest page, the figures. */
async function finishRow(
  driver: TurnDriver,
  run: SizeRun,
  options: TurnOverheadOptions,
  text: TextSource,
  log: (line: string) => void,
): Promise<TurnOverheadRow> {
  const { id, measured } = run;
  if (run.pendingCall) {
    const turn = await driver.turn(id, {
      input: [{ type: 'function_call_output', call_id: run.pendingCall, output: text.text(2_000) }],
      tools: [READ_FILE_TOOL],
    });
    run.stored = lastSeq(turn.response, run.stored);
  }
  for (let index = 0; index < options.notices; index++)
    await driver.postNotice(id, `notice ${index}: ${text.text(200)}`);
  const noticeTurn = await driver.turn(id, { input: 'any news?' });
  run.stored = lastSeq(noticeTurn.response, run.stored);
  const delivered = noticeTurn.response.context.notices_delivered.length;

  const times = measured.map((turn) => turn.ms);
  const row: TurnOverheadRow = {
    runtime: driver.runtime,
    size: run.size,
    itemsAtStart: run.itemsAtStart,
    loadMs: run.loadMs,
    turns: measured.length,
    p50Ms: median(times),
    p95Ms: percentile(times, 95),
    ratio: 1,
    promptCharactersMedian: median(measured.map((turn) => turn.response.context.prompt_chars)),
    itemsInPromptMedian: median(measured.map((turn) => turn.response.context.items_in_prompt)),
    notice: {
      ms: noticeTurn.ms,
      delivered,
      operationsLimit: 8 + 4 * delivered,
      ...(noticeTurn.storage ? { operations: operationsOf(noticeTurn.storage) } : {}),
    },
  };
  const storage = storageFigures(measured);
  if (storage) row.storage = storage;
  if (driver.newestPage) {
    const page = await driver.newestPage(id);
    row.newestPage = { operations: operationsOf(page), bytesRead: page.bytesRead };
  }
  const appends = driver.appendCounts?.slice(run.appendsBefore, run.appendsAfter) ?? [];
  if (appends.length > 0) {
    const kinds = driver.appendKinds?.slice(run.appendsBefore, run.appendsAfter) ?? [];
    const labels = [...new Set(kinds.flatMap((summary) => [...summary.keys()]))].sort();
    row.append = {
      items: options.appendBatch,
      operations: median(appends.map(operationsOf)),
      puts: median(appends.map((counts) => counts.put)),
      byKind: labels
        .map((label) => ({ label, count: median(kinds.map((summary) => summary.get(label)?.count ?? 0)) }))
        .filter((entry) => entry.count > 0),
    };
  }
  log(
    `${driver.runtime} ${run.size}: p50 ${row.p50Ms.toFixed(2)} ms, p95 ${row.p95Ms.toFixed(2)} ms` +
      (storage
        ? `, ${storage.operationsMedian} ops (max ${storage.operationsMax}), ${storage.bytesReadMedian} B read` +
          (storage.promptBytesMedian !== undefined ? ` for a ${storage.promptBytesMedian} B prompt` : '') +
          (row.notice?.operations !== undefined
            ? `; notice turn ${row.notice.operations} ops (limit ${row.notice.operationsLimit})`
            : '')
        : ''),
  );
  return row;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message.slice(0, 400) : String(error);
}

export function operationsOf(counts: StoreCounts): number {
  return counts.get + counts.head + counts.put + counts.list + counts.delete;
}

function storageFigures(turns: DrivenTurn[]): StorageFigures | undefined {
  const counted = turns.filter((turn): turn is DrivenTurn & { storage: StoreCounts } => turn.storage !== undefined);
  if (counted.length === 0) return undefined;
  const operations = counted.map((turn) => operationsOf(turn.storage));
  const of = (kind: keyof StoreCounts) => median(counted.map((turn) => turn.storage[kind]));
  const figures: StorageFigures = {
    operationsMedian: median(operations),
    operationsMax: Math.max(...operations),
    breakdown: { get: of('get'), head: of('head'), put: of('put'), list: of('list'), delete: of('delete') },
    bytesReadMedian: median(counted.map((turn) => turn.storage.bytesRead)),
    bytesReadMax: Math.max(...counted.map((turn) => turn.storage.bytesRead)),
    byKind: byKind(counted),
  };
  // The prompt and the background work are known only where every measured turn reports them.
  const prompted = counted.filter(
    (turn): turn is typeof turn & { promptBytes: number } => turn.promptBytes !== undefined,
  );
  if (prompted.length === counted.length) figures.promptBytesMedian = median(prompted.map((turn) => turn.promptBytes));
  // Every size gets a read budget: against the prompt's bytes, or where the runtime does not
  // report them (workerd), its characters (`context.prompt_chars`, fewer: a stricter budget).
  figures.readBudgetWorst = Math.max(
    ...counted.map(
      (turn) =>
        turn.storage.bytesRead / (1.1 * (turn.promptBytes ?? turn.response.context.prompt_chars) + READ_BUDGET_SLACK),
    ),
  );
  if (counted.every((turn) => turn.background !== undefined)) {
    figures.backgroundOperationsPerTurn =
      counted.reduce((total, turn) => total + operationsOf(turn.background!), 0) / counted.length;
  }
  return figures;
}

function byKind(turns: DrivenTurn[]): StorageFigures['byKind'] {
  const summaries = turns.map((turn) => summarize(turn.operations ?? []));
  const labels = [...new Set(summaries.flatMap((summary) => [...summary.keys()]))].sort();
  return labels.map((label) => ({
    label,
    count: median(summaries.map((summary) => summary.get(label)?.count ?? 0)),
    bytes: median(summaries.map((summary) => summary.get(label)?.bytes ?? 0)),
  }));
}

function lastSeq(response: { output: { seq: number }[] }, fallback: number): number {
  return response.output.at(-1)?.seq ?? fallback;
}

function emptyRow(runtime: string, size: number, stored: number, skipped: string): TurnOverheadRow {
  return {
    runtime,
    size,
    itemsAtStart: stored,
    loadMs: 0,
    turns: 0,
    p50Ms: Number.NaN,
    p95Ms: Number.NaN,
    ratio: Number.NaN,
    promptCharactersMedian: Number.NaN,
    itemsInPromptMedian: Number.NaN,
    skipped,
  };
}
