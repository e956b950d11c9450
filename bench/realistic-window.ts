import { DEFAULTS } from '../lib/defaults.ts';
import { Inbox } from '../lib/inbox/inbox.ts';
import type { Item } from '../lib/items.ts';
import { sessionExistsIn } from '../lib/session/log/config-object.ts';
import { SessionLog } from '../lib/session/session-log.ts';
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
 * is far longer than the window, on the memory store (counted, no view cache). The first turn
 * finds no overflow boundary: it builds the whole history's prompt once and stores one. The
 * measured turns after it should cost what the window costs, at any length. Goals: p50 at the
 * largest size / p50 at the smallest <= 1.5, and bytes read per turn <= 1.1 x prompt bytes +
 * 64 KiB (read budget <= 1).
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
}

const READ_BUDGET_SLACK = 64 * 1024;

/** Loads one session per size, then measures its turns: the first apart, then warm-up and measured ones. */
export async function measureRealisticWindow(options: RealisticWindowOptions): Promise<RealisticWindowRow[]> {
  const log = options.log ?? (() => undefined);
  const store = new MemoryStore();
  const driver = new MemoryTurnDriver(store);
  const rows: RealisticWindowRow[] = [];
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
    rate = stored / loadMs;
    log(`realistic window ${size}: loaded ${stored} items in ${(loadMs / 1000).toFixed(1)} s`);
    const turns = await takeTurns(driver, id, 1 + options.warmupTurns + options.measuredTurns);
    const first = turns[0]!;
    log(
      `realistic window ${size}: first turn ${first.ms.toFixed(0)} ms, ${kb(first.bytesRead)} read, ` +
        `${first.tokensBefore ?? '-'} tokens before the drop`,
    );
    const measured = row(size, stored, loadMs, first, turns.slice(1 + options.warmupTurns));
    rows.push(measured);
    log(
      `realistic window ${size}: p50 ${measured.p50Ms.toFixed(1)} ms, p95 ${measured.p95Ms.toFixed(1)} ms, ` +
        `${kb(measured.bytesReadMedian)} read (max ${kb(measured.bytesReadMax)}), prompt ` +
        `${kb(measured.promptBytesMedian)}, read budget ${measured.readBudgetWorst.toFixed(2)}, ` +
        `${measured.tokensBeforeMedian ?? '-'} tokens before the drop`,
    );
  }
  await driver.close();
  const base = rows.find((candidate) => !candidate.skipped);
  for (const candidate of rows) if (base && !candidate.skipped) candidate.ratio = candidate.p50Ms / base.p50Ms;
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

/** Turns alternating a request the echo model answers with a tool call, and that call's 2 KB output. */
async function takeTurns(driver: MemoryTurnDriver, id: string, count: number): Promise<TurnFigures[]> {
  const figures: TurnFigures[] = [];
  let pendingCall: string | undefined;
  for (let turn = 0; turn < count; turn++) {
    const input: TurnRequest['input'] = pendingCall
      ? [{ type: 'function_call_output', call_id: pendingCall, output: `contents of step ${turn}\n`.repeat(100) }]
      : `call read_file {"path":"src/step-${turn}.ts"}`;
    const driven: DrivenTurn = await driver.turn(id, { input, tools: [READ_FILE_TOOL] });
    const call = driven.response.output.find((item) => item.type === 'function_call');
    pendingCall = pendingCall ? undefined : call?.type === 'function_call' ? call.call_id : undefined;
    figures.push({
      ms: driven.ms,
      bytesRead: driven.storage!.bytesRead,
      gets: driven.storage!.get,
      promptBytes: driven.promptBytes!,
      tokensBefore: driven.response.context.overflow_dropped?.prompt_tokens_before,
    });
  }
  return figures;
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
    turns: measured.length,
    p50Ms: median(of((turn) => turn.ms)),
    p95Ms: percentile(
      of((turn) => turn.ms),
      95,
    ),
    ratio: 1,
    bytesReadMedian: median(of((turn) => turn.bytesRead)),
    bytesReadMax: Math.max(...of((turn) => turn.bytesRead)),
    promptBytesMedian: median(of((turn) => turn.promptBytes)),
    readBudgetWorst: Math.max(...of((turn) => turn.bytesRead / (1.1 * turn.promptBytes + READ_BUDGET_SLACK))),
    getsMedian: median(of((turn) => turn.gets)),
    ...(before.length > 0 ? { tokensBeforeMedian: median(before) } : {}),
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
      'memory store, counted, no view cache (every turn fetches and parses its view). The first turn ' +
      'finds no overflow boundary: it builds the whole history, drops it to 0.6 of the window and stores the ' +
      'boundary (shown apart). Then warm-up turns and the measured turns, alternating a request the echo model ' +
      'answers with a tool call and its 2 KB output. "tokens before" is the median ' +
      '`context.overflow_dropped.prompt_tokens_before`: the prompt the turn built before the drop. Read budget = ' +
      'bytes read / (1.1 x prompt bytes + 64 KiB), worst measured turn (goal <= 1); ratio = p50 / p50 at the ' +
      'smallest size, same run (goal <= 1.5).' +
      (loadAverage ? ` Load average at start ${loadAverage.start}, at end ${loadAverage.end || '-'}.` : ''),
    '',
    '| items | load s | first turn: ms / read / tokens before | turns | p50 ms | p95 ms | ratio | ' +
      'bytes read (median / max) | prompt bytes | read budget | gets | tokens before |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
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
        `${row.tokensBeforeMedian?.toLocaleString('en-US') ?? '- (fits)'} |`,
    );
  }
  lines.push('');
  return lines;
}

/** Goal rows: the p50 ratio at the largest size measured, and the worst read budget. */
export function realisticWindowGoals(
  rows: RealisticWindowRow[] | undefined,
): { goal: string; target: string; measured: string; met: string }[] {
  const measured = (rows ?? []).filter((row) => !row.skipped);
  const largest = measured.at(-1);
  if (!largest || measured.length < 2) return [];
  const at = (row: RealisticWindowRow) => row.itemsAtStart.toLocaleString('en-US');
  return [
    {
      goal: `p50 turn at ${at(largest)} / ${at(measured[0]!)} items, context_limit 200,000 (realistic window)`,
      target: '<= 1.5',
      measured: `${largest.ratio.toFixed(2)} (${largest.p50Ms.toFixed(1)} / ${measured[0]!.p50Ms.toFixed(1)} ms)`,
      met: largest.ratio <= 1.5 ? 'yes' : '**no**',
    },
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
