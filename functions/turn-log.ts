import { utf8Bytes } from '../lib/session/item-size.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import type { TurnUsage } from '../lib/ledger/usage.ts';
import type { CompactionSpend, TurnObservation } from '../lib/turn/index.ts';
import type { Metrics } from './metrics.ts';

/**
 * What every turn leaves behind besides its answer: one JSON log line (every runtime) and,
 * where the process keeps them (Node, Deno), its metrics (functions/metrics.ts).
 */

const OPERATIONS = ['get', 'head', 'put', 'list', 'delete'] as const;
export type StorageOps = Record<(typeof OPERATIONS)[number], number>;

/** The store with each operation counted into `ops` (the request's or run's) and the process's metrics. */
export function countedStore(store: ObjectStore, ops: StorageOps, metrics: Metrics | undefined): ObjectStore {
  // `inner`: what the write probe and the view cache are kept for (backendOf), not this wrapper.
  const counted = { inner: store } as unknown as ObjectStore;
  for (const operation of OPERATIONS) {
    const call = store[operation].bind(store) as (...args: unknown[]) => Promise<unknown>;
    (counted as unknown as Record<string, unknown>)[operation] = (...args: unknown[]) => {
      ops[operation] += 1;
      metrics?.count('tailgate_storage_operations_total', { op: operation });
      return call(...args);
    };
  }
  return counted;
}

export function noStorageOps(): StorageOps {
  return { get: 0, head: 0, put: 0, list: 0, delete: 0 };
}

export interface TurnLogOptions {
  /** Writes one line (default: stdout). */
  logLine: (line: string) => void;
  metrics: Metrics | undefined;
  /** The request's (or run's) storage operations so far. */
  ops: StorageOps;
  /** LOG_CONTENT: the line carries the turn's input and output. */
  logContent: boolean;
  /**
   * The id of the request the turn ran in (its x-request-id), null outside one (a queue consumer's
   * run); for a queued input's turn, the request that queued it, as its entry names it.
   */
  requestId: string | null;
  /** A queued input's turn whose entry names its request: the request whose pickup ran it (null outside one). */
  pickupRequestId?: string | null;
}

/**
 * The log line of a turn: the request it ran in (its x-request-id; a queued input's turn: the
 * request that queued it, and apart the one whose pickup ran it), session, turn, status (and
 * error code), model, tokens, cost, duration, time to first output, and the storage operations
 * of its request (a background or queued turn's run: functions/services.ts `inProcess`) until it
 * ended (the work after the answer, such as packing, is not in them). No content unless LOG_CONTENT.
 */
export function turnLogLine(
  outcome: TurnObservation,
  ops: StorageOps,
  logContent: boolean,
  requestId: string | null,
  pickupRequestId: string | null = null,
): string {
  const usage = outcome.usage;
  const total = Object.values(ops).reduce((sum, count) => sum + count, 0);
  return JSON.stringify({
    level: outcome.status === 'failed' ? 'warn' : 'info',
    event: 'turn',
    time: new Date().toISOString(),
    request_id: requestId,
    pickup_request_id: pickupRequestId,
    session_id: outcome.session_id,
    turn: outcome.turn,
    status: outcome.status,
    error_code: outcome.error_code,
    model: outcome.model,
    tokens: usage
      ? {
          input: usage.input_tokens,
          cached_input: usage.cached_input_tokens,
          cache_write: usage.cache_write_tokens,
          output: usage.output_tokens,
          reasoning: usage.reasoning_tokens,
        }
      : null,
    cost_usd: usage?.cost_usd ?? null,
    duration_ms: outcome.duration_ms,
    first_output_ms: outcome.first_output_ms,
    storage_ops: { ...ops, total },
    ...(logContent ? inlineDataAsSize({ input: outcome.request.input, output: outcome.output }) : {}),
  });
}

/** A `data:` URL with a media type: an image or file sent inline (up to MAX_IMAGE_BYTES, MAX_FILE_BYTES). */
const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?((?:;[^,;]*)*?)(;base64)?,/;

/**
 * LOG_CONTENT's input and output, each inline image or file written as its media type and size
 * (`[data:image/png, 70 bytes]`): its bytes would make a line of megabytes, which log sinks cut.
 */
function inlineDataAsSize(content: object): object {
  const text = JSON.stringify(content, (_key, value: unknown) => {
    const match = typeof value === 'string' ? DATA_URL.exec(value) : null;
    if (match === null) return value;
    const data = (value as string).slice(match[0].length);
    const bytes = match[3] ? Math.floor((base64Digits(data) * 3) / 4) : percentDecodedBytes(data);
    return `[data:${match[1] ?? 'text/plain'}, ${bytes} bytes]`;
  });
  return JSON.parse(text) as object;
}

/**
 * The base64 digits of `data` (either alphabet), in one pass: not its padding, nor the line breaks
 * or spaces it may be written across (a regular expression for the padding at its end would try
 * again from every "=", quadratic in a long run of them).
 */
function base64Digits(data: string): number {
  let digits = 0;
  for (let index = 0; index < data.length; index++) {
    const char = data[index]!;
    if ((char >= 'A' && char <= 'Z') || (char >= 'a' && char <= 'z') || (char >= '0' && char <= '9')) digits++;
    else if (char === '+' || char === '/' || char === '-' || char === '_') digits++;
  }
  return digits;
}

/**
 * The bytes percent-encoded `data` decodes to: an escape (`%` and two hex digits) one byte, any
 * other character its UTF-8 (a `%` not so followed stays itself). Linear: the escapes are found
 * in one pass, the UTF-8 counted in another.
 */
function percentDecodedBytes(data: string): number {
  let escapes = 0;
  for (let index = data.indexOf('%'); index !== -1; index = data.indexOf('%', index + 1)) {
    if (isHexDigit(data.charCodeAt(index + 1)) && isHexDigit(data.charCodeAt(index + 2))) {
      escapes++;
      index += 2;
    }
  }
  // An escape is three ASCII characters of UTF-8 for its one byte.
  return utf8Bytes(data) - 2 * escapes;
}

function isHexDigit(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || ((code | 0x20) >= 0x61 && (code | 0x20) <= 0x66);
}

/** The observer a request's turns report to (lib/turn/observe.ts). */
export function turnObserver(options: TurnLogOptions): (outcome: TurnObservation) => void {
  return (outcome) => {
    // The turn's answer does not depend on its log line: a sink that throws loses only the line.
    try {
      options.logLine(
        turnLogLine(outcome, options.ops, options.logContent, options.requestId, options.pickupRequestId),
      );
    } catch {
      // Nothing else to tell: the log is what failed.
    }
    const metrics = options.metrics;
    if (!metrics) return;
    const model = metrics.modelLabel(outcome.model ?? 'unknown');
    metrics.count('tailgate_turns_total', { status: outcome.status, model });
    // A replayed failure is no new one: its error was counted when it happened.
    if (outcome.error_code !== null && outcome.status === 'failed')
      metrics.count('tailgate_turn_errors_total', { code: outcome.error_code });
    metrics.observe('tailgate_turn_duration_seconds', { status: outcome.status }, outcome.duration_ms / 1000);
    if (outcome.first_output_ms !== null)
      metrics.observe('tailgate_turn_time_to_first_token_seconds', {}, outcome.first_output_ms / 1000);
    if (outcome.usage) countSpend(metrics, model, 'turn', outcome.usage);
    if (outcome.compaction)
      countSpend(metrics, metrics.modelLabel(outcome.compaction.model), 'compaction', outcome.compaction.usage);
  };
}

/** The observer of a request's manual compactions (POST .../compact, POST /v1/responses/compact): their metrics. */
export function compactionObserver(metrics: Metrics): (spend: CompactionSpend) => void {
  return (spend) => countSpend(metrics, metrics.modelLabel(spend.model), 'compaction', spend.usage);
}

/**
 * One model call's tokens and cost, by `model` (the one called) and `source`: `turn` for a
 * turn's own call, `compaction` for a summary (in a turn or a manual compaction).
 */
function countSpend(metrics: Metrics, model: string, source: 'turn' | 'compaction', usage: TurnUsage): void {
  const kinds = {
    input: usage.input_tokens,
    cached_input: usage.cached_input_tokens,
    cache_write: usage.cache_write_tokens,
    output: usage.output_tokens,
    reasoning: usage.reasoning_tokens,
  };
  for (const [kind, tokens] of Object.entries(kinds))
    metrics.count('tailgate_tokens_total', { kind, model, source }, tokens);
  if (usage.cost_usd !== null) metrics.count('tailgate_cost_usd_total', { model, source }, usage.cost_usd);
}
