import { DEFAULTS } from '../lib/defaults.ts';
import { Inbox } from '../lib/inbox/inbox.ts';
import type { Item } from '../lib/items.ts';
import { RECORD_BOUND } from '../lib/session/keys.ts';
import { sessionExistsIn } from '../lib/session/log/config-object.ts';
import { SessionLog } from '../lib/session/session-log.ts';
import { restoreItemsIn } from '../lib/session/view-items.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { importLines } from '../lib/transfer.ts';
import { viewPolicy } from '../lib/turn/view-policy.ts';
import type { TurnRequest } from '../lib/turn/index.ts';
import { agentItems } from './agent-session.ts';
import { MemoryTurnDriver } from './memory-driver.ts';
import { median, percentile } from './stats.ts';
import { READ_FILE_TOOL, type DrivenTurn } from './turn-driver.ts';

/**
 * Overflow work bounded by the window (lib/compaction/fit-prompt.ts, lib/session/log/views.ts
 * `fromBoundary`): sessions of the agent mix with `context_limit` 200,000 tokens, whose history
 * is far longer than the window, on the memory store (counted). The first turn finds no
 * overflow boundary: it builds the whole history's prompt once and stores one. The measured
 * turns after it should cost what the window costs, at any length. They run twice: without a
 * view cache (every turn fetches and parses its view, as a process serving more sessions than
 * its cache holds does), then with the server's default one (DEFAULTS.viewCacheBytes, as a
 * process a session keeps coming back to). Goals: p50 at the largest size / p50 at the
 * smallest <= 1.5, and bytes read per turn <= 1.1 x prompt bytes + 64 KiB (read budget <= 1).
 */

export interface RealisticWindowOptions {
  sizes: number[];
  contextLimit: number;
  warmupTurns: number;
  measuredTurns: number;
  seed: number;
  /** Do not load a size whose projected load time exceeds this (the sizes before set the rate). */
  loadBudgetMs: number;
  log?: (line: string) => void;
}

interface TurnFigures {
  ms: number;
  bytesRead: number;
  gets: number;
  promptBytes: number;
  /** `context.overflow_dropped.prompt_tokens_before` (undefined: nothing dropped). */
  tokensBefore: number | undefined;
}

export interface RealisticWindowRow {
  size: number;
  /** Items stored when the first turn began. */
  itemsAtStart: number;
  loadMs: number;
  /** The turn that found no boundary (it builds the whole prompt and stores one). */
  first?: TurnFigures;
  turns: number;
  p50Ms: number;
  p95Ms: number;
  /** p50 / p50 at the smallest size, in the same run. */
  ratio: number;
  bytesReadMedian: number;
  bytesReadMax: number;
  promptBytesMedian: number;
  /** Worst bytes read / (1.1 x prompt bytes + 64 KiB) over the measured turns (goal <= 1). */
  readBudgetWorst: number;
  getsMedian: number;
  /** Median `prompt_tokens_before` of the measured turns (undefined: no turn dropped anything). */
  tokensBeforeMedian?: number;
  /** Why the size has no figures. */
  skipped?: string;
  /** Bytes of the newest view's parts after the measured turns (viewParts). */
  view?: ViewParts;
  /** The turns after those, with the default view cache (none when the size was skipped). */
  cached?: CachedFigures;
}

/** The measured turns with the view cache on. */
export interface CachedFigures {
  turns: number;
  p50Ms: number;
  p95Ms: number;
  /** p50 / p50 at the smallest size with the cache on, in the same run. */
  ratio: number;
  bytesReadMedian: number;
  getsMedian: number;
}

/** Where a view's bytes go: its tail by kind and place, each aggregate, the key index, the rest. */
export interface ViewParts {
  total: number;
  /** Messages from the boundary's `message_start_seq` on, and before it. */
  windowMessages: number;
  earlyMessages: number;
  /** Tool items from the boundary's `tool_start_seq` on: whole and compacted; and older ones. */
  windowTools: number;
  windowToolsCompacted: number;
  earlyTools: number;
  repeated: number;
  repeatedKeys: number;
  /** The object with the entries of `repeated` the view leaves out (not in `total`), and their count. */
  olderRepeated: number;
  olderRepeatedKeys: number;
  repeatFlags: number;
  imageOrder: number;
  keys: number;
  other: number;
}

const READ_BUDGET_SLACK = 64 * 1024;
/** The smallest load whose rate projects the next sizes' load times. */
const MIN_RATE_ITEMS = 10_000;

/**
 * Loads one session per size, then takes their turns interleaved, one per session in turn (the
 * first turns apart, then warm-up and measured ones), so a change in the machine's load falls
 * on every size alike.
 */
export async function measureRealisticWindow(options: RealisticWindowOptions): Promise<RealisticWindowRow[]> {
  const log = options.log ?? (() => undefined);
  const store = new MemoryStore();
  const driver = new MemoryTurnDriver(store);
  const cachedDriver = new MemoryTurnDriver(store, { viewCacheBytes: DEFAULTS.viewCacheBytes });
  const rows: RealisticWindowRow[] = [];
  const loaded: {
    size: number;
    id: string;
    stored: number;
    loadMs: number;
    turn: (driver: MemoryTurnDriver) => Promise<TurnFigures>;
  }[] = [];
  let rate: number | undefined;
  for (const size of options.sizes) {
    if (rate !== undefined && size / rate > options.loadBudgetMs) {
      const skipped =
        `not measured: loading ${size.toLocaleString('en-US')} items would take about ` +
        `${(size / rate / 1000).toFixed(0)} s at the rate so far (${(rate * 1000).toFixed(0)} items/s), ` +
        `over the ${(options.loadBudgetMs / 1000).toFixed(0)} s budget`;
      log(`realistic window ${size}: ${skipped}`);
      rows.push({ ...emptyRow(size), skipped });
      continue;
    }
    const id = `window_${size}`;
    const start = performance.now();
    const stored = await load(store, id, size, options);
    const loadMs = performance.now() - start;
    // A small load is mostly start-up (compiling, warming up): it does not set the rate.
    if (stored >= MIN_RATE_ITEMS) rate = stored / loadMs;
    log(`realistic window ${size}: loaded ${stored} items in ${(loadMs / 1000).toFixed(1)} s`);
    loaded.push({ size, id, stored, loadMs, turn: turnTaker(id) });
  }
  const firsts: TurnFigures[] = [];
  for (const session of loaded) {
    const first = await session.turn(driver);
    firsts.push(first);
    log(
      `realistic window ${session.size}: first turn ${first.ms.toFixed(0)} ms, ${kb(first.bytesRead)} read, ` +
        `${first.tokensBefore ?? '-'} tokens before the drop`,
    );
  }
  const rounds = async (by: MemoryTurnDriver) => {
    const turns: TurnFigures[][] = loaded.map(() => []);
    for (let round = 0; round < options.warmupTurns + options.measuredTurns; round++)
      for (const [index, session] of loaded.entries()) turns[index]!.push(await session.turn(by));
    return turns.map((taken) => taken.slice(options.warmupTurns));
  };
  const turns = await rounds(driver);
  // The same sessions again, through a process that keeps the views it reads and writes.
  const cachedTurns = await rounds(cachedDriver);
  for (const [index, session] of loaded.entries()) {
    const measured = row(session.size, session.stored, session.loadMs, firsts[index]!, turns[index]!);
    measured.cached = figuresOf(cachedTurns[index]!);
    measured.view = await viewParts(store, session.id);
    log(`realistic window ${session.size}: view ${JSON.stringify(measured.view)}`);
    log(
      `realistic window ${session.size}: p50 ${measured.p50Ms.toFixed(1)} ms, p95 ${measured.p95Ms.toFixed(1)} ms, ` +
        `${kb(measured.bytesReadMedian)} read (max ${kb(measured.bytesReadMax)}), prompt ` +
        `${kb(measured.promptBytesMedian)}, read budget ${measured.readBudgetWorst.toFixed(2)}, ` +
        `${measured.tokensBeforeMedian ?? '-'} tokens before the drop; view cache on: p50 ` +
        `${measured.cached.p50Ms.toFixed(1)} ms, ${kb(measured.cached.bytesReadMedian)} read`,
    );
    rows.push(measured);
  }
  rows.sort((a, b) => a.size - b.size);
  await driver.close();
  await cachedDriver.close();
  const base = rows.find((candidate) => !candidate.skipped);
  for (const candidate of rows) {
    if (!base || candidate.skipped) continue;
    candidate.ratio = candidate.p50Ms / base.p50Ms;
    candidate.cached!.ratio = candidate.cached!.p50Ms / base.cached!.p50Ms;
  }
  return rows;
}

/**
 * The agent mix imported as an export of `size` items (lib/transfer.ts `importLines`, what
 * POST /v1/sessions/import runs: segments and a view written as it goes), the session's
 * `context_limit` in its header.
 */
async function load(store: ObjectStore, id: string, size: number, options: RealisticWindowOptions): Promise<number> {
  const sessions = new SessionLog(store, { viewPolicy });
  const services = { sessions, inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }), env: {} };
  const session = await importLines(services, exportStream(id, size, options), {
    maxItemBytes: DEFAULTS.maxItemBytes,
    maxNoticeBytes: DEFAULTS.maxNoticeBytes,
    maxLineBytes: DEFAULTS.maxBodyBytes,
  });
  return session.counts.items;
}

/** The export lines of the session, in chunks of about 64 KiB. */
async function* exportStream(id: string, size: number, options: RealisticWindowOptions): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  const at = '2026-12-01T00:00:00.000Z';
  const header = {
    type: 'session',
    format: 'tailgate.export.v1',
    id,
    created_at: at,
    instructions: 'You are a coding agent working through a large repository.',
    model: null,
    strategies: null,
    strategy_config: { context_limit: options.contextLimit },
    tools: [],
    metadata: {},
  };
  const source = agentItems({ seed: options.seed });
  let text = `${JSON.stringify(header)}\n`;
  for (let seq = 1; seq <= size; seq++) {
    text += `${JSON.stringify({ ...(source.next().value as Item), seq, created_at: at })}\n`;
    if (text.length >= 64 * 1024 || seq === size) {
      yield encoder.encode(text);
      text = '';
    }
  }
}

/** The parts of the session's newest view, split by its newest record's overflow boundary. */
async function viewParts(store: ObjectStore, id: string): Promise<ViewParts> {
  const listed = await store.list(`sessions/${id}/turn/`, { limit: 200 });
  const newest = async (suffix: RegExp) => {
    const key = listed.objects.map((object) => object.key).find((key) => suffix.test(key));
    const object = key ? await store.get(key) : null;
    return object ? { bytes: object.body.byteLength, value: JSON.parse(new TextDecoder().decode(object.body)) } : null;
  };
  const view = await newest(/\/\d{12}\.view$/);
  const done = await newest(/\/\d{12}\.done$/);
  const boundary = done?.value.overflow ?? (await newest(/\/\d{12}$/))?.value.overflow;
  const messageStart: number = boundary?.message_start_seq ?? 0;
  const toolStart: number = boundary?.tool_start_seq ?? 0;
  const size = (value: unknown) => JSON.stringify(value ?? null).length;
  const parts: ViewParts = {
    total: view?.bytes ?? 0,
    windowMessages: 0,
    earlyMessages: 0,
    windowTools: 0,
    windowToolsCompacted: 0,
    earlyTools: 0,
    repeated: size(view?.value.aggregates.repeated),
    repeatedKeys: Object.keys(view?.value.aggregates.repeated ?? {}).length,
    ...(await olderRepeated(store, id, view?.value.aggregates.repeated_older)),
    repeatFlags: size(view?.value.aggregates.repeat_flags),
    imageOrder: size(view?.value.aggregates.image_order),
    keys: size(view?.value.keys),
    other: 0,
  };
  const tail = view?.value.tail;
  // Sized as stored, placed by seq: a stored item leaves out a seq one after the previous one's.
  const storedBytes: number[] = (tail?.items ?? []).map((item: unknown) => size(item) + 1);
  if (tail) restoreItemsIn(tail);
  const callSeq = new Map<string, number>();
  for (const [index, item] of (tail?.items ?? []).entries()) {
    if (item.type === 'function_call') callSeq.set(item.call_id, item.seq);
    const bytes = storedBytes[index]!;
    if (item.type === 'message') {
      if (item.seq >= messageStart) parts.windowMessages += bytes;
      else parts.earlyMessages += bytes;
    } else if ((callSeq.get(item.call_id) ?? item.seq) < toolStart) parts.earlyTools += bytes;
    else if (item.compacted) parts.windowToolsCompacted += bytes;
    else parts.windowTools += bytes;
  }
  const counted =
    parts.windowMessages +
    parts.earlyMessages +
    parts.windowTools +
    parts.windowToolsCompacted +
    parts.earlyTools +
    parts.repeated +
    parts.repeatFlags +
    parts.imageOrder +
    parts.keys;
  parts.other = parts.total - counted;
  return parts;
}

/** The bytes and entries of the object a split `repeated` names (lib/session/log/older-repeated.ts). */
async function olderRepeated(
  store: ObjectStore,
  id: string,
  split: { before_seq: number; record: number } | undefined,
): Promise<{ olderRepeated: number; olderRepeatedKeys: number }> {
  if (!split) return { olderRepeated: 0, olderRepeatedKeys: 0 };
  const suffix = `${String(RECORD_BOUND - split.record).padStart(12, '0')}-repeated-${split.before_seq}`;
  let cursor: string | undefined;
  do {
    const page = await store.list(`sessions/${id}/keys/`, { limit: 1000, ...(cursor ? { cursor } : {}) });
    const key = page.objects.map((object) => object.key).find((name) => name.endsWith(suffix));
    const object = key ? await store.get(key) : null;
    if (object) {
      const { repeated } = JSON.parse(new TextDecoder().decode(object.body));
      return { olderRepeated: object.body.byteLength, olderRepeatedKeys: Object.keys(repeated).length };
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return { olderRepeated: 0, olderRepeatedKeys: 0 };
}

/**
 * The session's turns, one per call: alternating a request the echo model answers with a tool
 * call, and that call's 2 KB output.
 */
function turnTaker(id: string): (driver: MemoryTurnDriver) => Promise<TurnFigures> {
  let pendingCall: string | undefined;
  let turn = 0;
  return async (driver) => {
    const input: TurnRequest['input'] = pendingCall
      ? [{ type: 'function_call_output', call_id: pendingCall, output: `contents of step ${turn}\n`.repeat(100) }]
      : `call read_file {"path":"src/step-${turn}.ts"}`;
    turn += 1;
    const driven: DrivenTurn = await driver.turn(id, { input, tools: [READ_FILE_TOOL] });
    const call = driven.response.output.find((item) => item.type === 'function_call');
    pendingCall = pendingCall ? undefined : call?.type === 'function_call' ? call.call_id : undefined;
    return {
      ms: driven.ms,
      bytesRead: driven.storage!.bytesRead,
      gets: driven.storage!.get,
      promptBytes: driven.promptBytes!,
      tokensBefore: driven.response.context.overflow_dropped?.prompt_tokens_before,
    };
  };
}

function row(
  size: number,
  itemsAtStart: number,
  loadMs: number,
  first: TurnFigures,
  measured: TurnFigures[],
): RealisticWindowRow {
  const of = (pick: (turn: TurnFigures) => number) => measured.map(pick);
  const before = measured.flatMap((turn) => (turn.tokensBefore === undefined ? [] : [turn.tokensBefore]));
  return {
    size,
    itemsAtStart,
    loadMs,
    first,
    ...figuresOf(measured),
    bytesReadMax: Math.max(...of((turn) => turn.bytesRead)),
    promptBytesMedian: median(of((turn) => turn.promptBytes)),
    readBudgetWorst: Math.max(...of((turn) => turn.bytesRead / (1.1 * turn.promptBytes + READ_BUDGET_SLACK))),
    ...(before.length > 0 ? { tokensBeforeMedian: median(before) } : {}),
  };
}

/** The figures every row gives of its measured turns (and of those through the view cache). */
function figuresOf(measured: TurnFigures[]): CachedFigures {
  const ms = measured.map((turn) => turn.ms);
  return {
    turns: measured.length,
    p50Ms: median(ms),
    p95Ms: percentile(ms, 95),
    ratio: 1,
    bytesReadMedian: median(measured.map((turn) => turn.bytesRead)),
    getsMedian: median(measured.map((turn) => turn.gets)),
  };
}

function emptyRow(size: number): RealisticWindowRow {
  return {
    size,
    itemsAtStart: 0,
    loadMs: 0,
    turns: 0,
    p50Ms: 0,
    p95Ms: 0,
    ratio: 0,
    bytesReadMedian: 0,
    bytesReadMax: 0,
    promptBytesMedian: 0,
    readBudgetWorst: 0,
    getsMedian: 0,
  };
}

/** The section of RESULTS.md: one row per size. */
export function realisticWindowSection(
  rows: RealisticWindowRow[] | undefined,
  contextLimit: number,
  loadAverage: { start: string; end: string } | undefined,
  why: string,
): string[] {
  const lines = [
    '## Realistic window: overflow work bounded by the window',
    '',
    'Command: `npm run bench -- --only=realistic-window` (bench/realistic-window.ts)',
    '',
  ];
  if (!rows) return [...lines, `${why}.`, ''];
  lines.push(
    `One session per size of the agent mix (as section 1), \`strategy_config.context_limit\` ` +
      `${contextLimit.toLocaleString('en-US')} tokens, default strategies (no \`compact\`: the overflow ` +
      'safety net), loaded as an import (lib/transfer.ts, what POST /v1/sessions/import runs); ' +
      'memory store, counted. The first turn ' +
      'finds no overflow boundary: it builds the whole history, drops it to 0.6 of the window and stores the ' +
      'boundary (shown apart). Then warm-up turns and the measured turns, one per session in turn (the sizes ' +
      "interleaved, so a change in the machine's load falls on all of them alike), alternating a request the " +
      'echo model answers with a tool call and its 2 KB output: first with no view cache (every turn fetches ' +
      'and parses its view), then as many again with the default view cache (`VIEW_CACHE_BYTES`, 16 MiB: a ' +
      'process the session keeps coming back to; "cached" columns). "tokens before" is the median ' +
      '`context.overflow_dropped.prompt_tokens_before`: the prompt the turn built from the stored boundary on, ' +
      'before the drop (messages behind that boundary its read reached are not counted). Read budget = ' +
      'bytes read / (1.1 x prompt bytes + 64 KiB), worst measured turn (goal <= 1); ratio = p50 / p50 at the ' +
      'smallest size with the same cache setting, same run (goal <= 1.5).' +
      (loadAverage ? ` Load average at start ${loadAverage.start}, at end ${loadAverage.end || '-'}.` : ''),
    '',
    '| items | load s | first turn: ms / read / tokens before | turns | p50 ms | p95 ms | ratio | ' +
      'bytes read (median / max) | prompt bytes | read budget | gets | tokens before | ' +
      'cached: p50 ms | p95 ms | ratio | bytes read | gets |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const row of rows) {
    if (row.skipped) {
      lines.push(`| ${row.size.toLocaleString('en-US')} | ${row.skipped} |`);
      continue;
    }
    const first = row.first!;
    lines.push(
      `| ${row.itemsAtStart.toLocaleString('en-US')} | ${(row.loadMs / 1000).toFixed(0)} | ` +
        `${first.ms.toFixed(0)} / ${kb(first.bytesRead)} / ${first.tokensBefore?.toLocaleString('en-US') ?? '-'} | ` +
        `${row.turns} | ${row.p50Ms.toFixed(1)} | ${row.p95Ms.toFixed(1)} | ${row.ratio.toFixed(2)} | ` +
        `${kb(row.bytesReadMedian)} / ${kb(row.bytesReadMax)} | ${kb(row.promptBytesMedian)} | ` +
        `${row.readBudgetWorst.toFixed(2)} | ${row.getsMedian} | ` +
        `${row.tokensBeforeMedian?.toLocaleString('en-US') ?? '- (fits)'} | ` +
        (row.cached
          ? `${row.cached.p50Ms.toFixed(1)} | ${row.cached.p95Ms.toFixed(1)} | ${row.cached.ratio.toFixed(2)} | ` +
            `${kb(row.cached.bytesReadMedian)} | ${row.cached.getsMedian} |`
          : '- | - | - | - | - |'),
    );
  }
  lines.push('', ...viewPartsTable(rows), '');
  return lines;
}

/** Where the bytes of each size's newest view go (after its measured turns), the most a turn reads of it. */
function viewPartsTable(rows: RealisticWindowRow[]): string[] {
  const measured = rows.filter((row) => row.view);
  if (measured.length === 0) return [];
  const parts: [string, (view: ViewParts) => string][] = [
    ['whole view', (view) => kb(view.total)],
    ['tail: messages from `message_start_seq`', (view) => kb(view.windowMessages)],
    ['tail: messages before it', (view) => kb(view.earlyMessages)],
    ['tail: tool items from `tool_start_seq`, whole', (view) => kb(view.windowTools)],
    ['tail: tool items from `tool_start_seq`, compacted', (view) => kb(view.windowToolsCompacted)],
    ['tail: tool items behind `tool_start_seq`', (view) => kb(view.earlyTools)],
    ['aggregates: `repeated` (keys)', (view) => `${kb(view.repeated)} (${view.repeatedKeys.toLocaleString('en-US')})`],
    [
      'older entries of `repeated`, apart (keys; not in the view, read only by a read that meets them)',
      (view) => `${kb(view.olderRepeated)} (${view.olderRepeatedKeys.toLocaleString('en-US')})`,
    ],
    ['aggregates: `repeat_flags`', (view) => kb(view.repeatFlags)],
    ['aggregates: `image_order`', (view) => kb(view.imageOrder)],
    ['`keys` (repeat index versions)', (view) => kb(view.keys)],
    ['the rest', (view) => kb(view.other)],
  ];
  return [
    'Where the bytes of the newest view go after the measured turns (its JSON; the split by the boundary ' +
      'the last turn left, bench/realistic-window.ts `viewParts`):',
    '',
    `| part | ${measured.map((row) => row.itemsAtStart.toLocaleString('en-US')).join(' | ')} |`,
    `|---|${measured.map(() => '---|').join('')}`,
    ...parts.map(([label, value]) => `| ${label} | ${measured.map((row) => value(row.view!)).join(' | ')} |`),
  ];
}

/** Goal rows: the p50 ratio at the largest size measured, and the worst read budget. */
export function realisticWindowGoals(
  rows: RealisticWindowRow[] | undefined,
): { goal: string; target: string; measured: string; met: string }[] {
  const measured = (rows ?? []).filter((row) => !row.skipped);
  const largest = measured.at(-1);
  if (!largest || measured.length < 2) return [];
  const at = (row: RealisticWindowRow) => row.itemsAtStart.toLocaleString('en-US');
  const smallest = measured[0]!;
  const previous = measured.at(-2)!;
  // The smallest session's prompt may not fill the window: the same p50 per KiB of prompt, and
  // the ratio between the two longest sessions (whose prompts both fill it), tell how much of
  // the ratio is the window's size and how much the history's.
  const perKiB = (row: RealisticWindowRow) => row.p50Ms / (row.promptBytesMedian / 1024);
  return [
    {
      goal:
        `p50 turn at ${at(largest)} / ${at(smallest)} items, context_limit 200,000, ` +
        'no view cache (realistic window)',
      target: '<= 1.5',
      measured:
        `${largest.ratio.toFixed(2)} (${largest.p50Ms.toFixed(1)} / ${smallest.p50Ms.toFixed(1)} ms; prompts ` +
        `${kb(largest.promptBytesMedian)} / ${kb(smallest.promptBytesMedian)}: per KiB of prompt ` +
        `${(perKiB(largest) / perKiB(smallest)).toFixed(2)})` +
        (previous === smallest
          ? ''
          : `; ${at(largest)} / ${at(previous)} items ${(largest.p50Ms / previous.p50Ms).toFixed(2)}`),
      met: largest.ratio <= 1.5 ? 'yes' : '**no**',
    },
    ...(largest.cached && smallest.cached
      ? [
          {
            goal:
              `p50 turn at ${at(largest)} / ${at(smallest)} items, context_limit 200,000, ` +
              'the default view cache on (realistic window)',
            target: '<= 1.5',
            measured:
              `${largest.cached.ratio.toFixed(2)} (${largest.cached.p50Ms.toFixed(1)} / ` +
              `${smallest.cached.p50Ms.toFixed(1)} ms)` +
              (previous === smallest || !previous.cached
                ? ''
                : `; ${at(largest)} / ${at(previous)} items ` +
                  (largest.cached.p50Ms / previous.cached.p50Ms).toFixed(2)),
            met: largest.cached.ratio <= 1.5 ? 'yes' : '**no**',
          },
        ]
      : []),
    {
      goal: 'Bytes read per turn / (1.1 x prompt bytes + 64 KiB), worst turn, realistic window',
      target: '<= 1',
      measured: measured.map((row) => `${row.readBudgetWorst.toFixed(2)} at ${at(row)}`).join(', '),
      met: measured.every((row) => row.readBudgetWorst <= 1) ? 'yes' : '**no**',
    },
  ];
}

function kb(bytes: number): string {
  return `${(bytes / 1024).toFixed(1)} KiB`;
}
