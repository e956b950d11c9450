import type { OnBusy } from '../session/fields.ts';
import type { Tracer } from '@opentelemetry/api';
import type { ServiceConfig } from '../config.ts';
import type { SessionConfig } from '../session/records.ts';
import type { LogScope } from '../session/keys.ts';
import type { Model, TokenLogprob } from '../models/model.ts';
import type { Inbox } from '../inbox/index.ts';
import type { OpenTurn, SessionLog } from '../session/session-log.ts';
import type { TokenEncoders } from '../tokens/token-counter.ts';
import type { TurnUsage } from '../ledger/usage.ts';
import type { TokenBudget, TokenSpend } from '../ledger/token-spend.ts';
import type { Item, ReasoningItem } from '../items.ts';
import type { OutputItem, TurnRequest, TurnResponse } from './wire.ts';
import type { WebhookSink } from '../webhooks/events.ts';
import type { RunningTurns } from './running.ts';

export type { OutputItem, TurnContext, TurnRequest, TurnResponse } from './wire.ts';

/**
 * How a turn is claimed: `idempotencyKey` replays the stored outcome of a repeated key;
 * `afterTurn` makes the turn follow that turn or fail with NotNewestTurnError (judged after
 * the replay, so a retry is answered, not refused).
 */
export interface TurnOptions {
  idempotencyKey?: string;
  afterTurn?: number;
  /** The request's busy policy, if it names one (an `interrupt` goes ahead of queued inputs). */
  onBusy?: OnBusy;
  /** A busy refusal is answered by queuing the input (lib/turn/busy.ts; see CommitOptions.enqueues). */
  enqueues?: boolean;
  /**
   * Refuses the turn for what its session's config says (the facade: a tool_choice its tools
   * lack), judged after a repeated key's replay and before anything is written.
   */
  checkConfig?: (config: SessionConfig) => void;
  /**
   * Run a background turn claimed already (lib/turn/background.ts): its record carries
   * `writer`, and its settings and input come from the record. The turn stops when someone
   * else closes it (a cancel), checked at each renewal of its lease, which `lease` holds (its
   * runner gives it up when it stops with the turn left open).
   */
  background?: { turn: number; writer: string; lease?: HeldLease };
  /**
   * The turn is streamed (lib/turn/stream-turn.ts): its record's settings say `stream: true`, so
   * a reader of its events knows it has a journal however it ended, a batch written or not.
   */
  stream?: boolean;
  /**
   * Its answer is sent only once it ended (a stored response that is neither streamed nor in the
   * background): its record's settings say `answered_at_end: true`, so a request that finds it
   * failed by a lapsed lease (its process died) knows its client never got its id, and takes it
   * out of its conversation as its own process would have (lib/openai/dead-turn.ts; so do a
   * native turn and the pickup of an input queued behind it, ./dead-turn.ts).
   */
  answeredAtEnd?: boolean;
  /**
   * Judges the session's open turn whose lease ran out before the claim closes it (its number
   * and its record's request settings), or its newest turn closed so with no output before the
   * claim follows it: what it throws refuses the turn, nothing written.
   */
  onLapsed?: (lapsed: { turn: number; request: unknown }) => void;
  /**
   * Told the turn, the seq of its first input item (a retake, which has none: the seq its
   * output would have begun at) and the generation its ids name there (idGeneration: undefined
   * in a session stored before they named one) once its failed completion landed (the facade
   * takes such a turn out again: lib/openai/stored-turn.ts).
   */
  onFailed?: (failed: { turn: number; seq: number; generation: string | undefined }) => void;
  /**
   * Told the model's log probabilities of its output's tokens, by output item, when the request's
   * `model_settings.logprobs` asked for them and the model gave them (the facade answers them in
   * the response it keeps: lib/openai/stored-turn.ts); a turn answered again calls no model.
   */
  onLogprobs?: (logprobs: TokenLogprob[][]) => void;
  /**
   * Told the incarnation and generation each claim attempt writes the turn in, before its
   * `turn.started` (a streamed turn journals its events there: lib/turn/journal.ts).
   */
  onClaimed?: (scope: LogScope) => void;
  /**
   * The input is empty and takes the session's newest turn again: that turn must have failed
   * or been cancelled (its input stands unanswered in the history), else 400 invalid_request
   * naming `input`. The model answers the history as it stands; the turn stores only its output.
   */
  retake?: boolean;
  /**
   * With `retake`, the items the failed turn it takes again stored as its input: under an
   * Idempotency-Key the request is compared as one asking them (the retry of that turn under its
   * key, or of this one, is replayed; lib/openai/failed-steps.ts).
   */
  retaken?: readonly Item[];
}

/**
 * The lease a background turn's runner holds: the turn, and the etag of the runner's last write
 * of `.lease` (none once another runner has it, or given up). Its runner gives it up when it
 * stops with the turn left open (lib/turn/background-runner.ts), so the next runs at once.
 */
export interface HeldLease {
  turn?: OpenTurn;
  etag?: string | undefined;
}

/**
 * What a runner needs to take a claimed background turn over (the queue message), and the
 * `x-request-id` of the request that sent it, which its turn's log line names (absent in a
 * message from older code, and in one sent outside a request).
 */
export interface BackgroundTurn {
  session_id: string;
  turn: number;
  writer: string;
  request_id?: string | undefined;
  /**
   * A queued input's turn (lib/turn/pickup.ts `pickUp`): the `x-request-id` of the request that
   * queued it, as its queue entry names it, which its log line names in place of `request_id`
   * (absent for any other turn, and for an entry stored before entries named it).
   */
  enqueued_by?: string | undefined;
}

/** The service types of a turn; its wire types are derived from the schemas in wire.ts. */

export type StoredError = { code: string; message: string; details?: unknown };

/**
 * The part of the session log the pipeline uses (a Pick, so tests can hand in a wrapper).
 * Every method is required: a wrapper that left one out would silently skip its step.
 */
export type TurnSessionLog = Pick<
  SessionLog,
  | 'get'
  | 'beginTurn'
  | 'claimTurn'
  | 'storeAttachments'
  | 'checkAttachments'
  | 'readContext'
  | 'needsView'
  | 'previewContext'
  | 'hydrate'
  | 'readMedia'
  | 'completeTurn'
  | 'commitTurnContext'
  | 'pack'
  | 'renewLease'
  | 'takeLease'
  | 'renewHeldLease'
  | 'releaseHeldLease'
  | 'holdsLease'
  | 'closedBy'
  | 'closerNotices'
  | 'leaveDeleted'
  | 'leaveGone'
  | 'storeStoppedSpend'
  | 'storeCharge'
  | 'queued'
  | 'journal'
  | 'getTurn'
  | 'enqueue'
  | 'readQueued'
  | 'copyBlobs'
  | 'queuedTakenBefore'
  | 'queuedTakenUp'
  | 'removeQueued'
  | 'lowerQueueSignal'
  | 'markQueued'
  | 'withdrawQueued'
  | 'queuedWithdrawing'
  | 'cancelTurn'
  | 'closeIfExpired'
  | 'journalRun'
  | 'completedResponse'
  | 'listQueuedInputs'
  | 'scope'
  | 'exists'
  | 'refreshIndex'
  | 'getWithNewestTurn'
  | 'deleteTurn'
>;

/** The part of the inbox the pipeline uses. */
export type TurnInbox = Pick<
  Inbox,
  | 'consume'
  | 'fetch'
  | 'peek'
  | 'peekLost'
  | 'noticesPerTurn'
  | 'recover'
  | 'recordCarrier'
  | 'giveBack'
  | 'forget'
  | 'tookNothing'
>;

/** Everything one request's pipeline works with, built per request by the runtime entry. */
export interface TurnServices {
  sessions: TurnSessionLog;
  inbox: TurnInbox;
  config: ServiceConfig;
  /**
   * The app's clock (functions/services.ts ServiceInputs.clock, else the system's), as the session
   * log and inbox have it: the `session.idle` a pickup sends is stamped by it, as a turn's events are.
   */
  clock: () => Date;
  /** The plain string environment (strategy thresholds, PROMPT_STRATEGY). */
  env: Record<string, string | undefined>;
  /** Resolves a model id (throws a 400-coded error for an unknown one). */
  model: (id: string) => Model;
  /** Runs work that must outlive the response (waitUntil on Workers). */
  background: (task: Promise<unknown>) => void;
  /** Failures: what an operator acts on (console.error by default). */
  log: (message: string, details?: unknown) => void;
  /** The `x-request-id` of the request these services serve (none outside one): a queued input keeps it. */
  requestId?: string | null;
  /**
   * Routine events, one line each: a turn cancelled, interrupted or stopped by its session's
   * delete, a queued message delivered again, a queued input dropped (console.info by default).
   */
  info: (message: string) => void;
  /** Real tokenizers the runtime provides (Node, Deno); the approximation without them. */
  tokenEncoders?: TokenEncoders;
  /**
   * Hands a claimed background turn to its runner: a queue on Workers, else this process
   * (`runInProcess`, lib/turn/background-runner.ts).
   */
  startBackground: (run: BackgroundTurn) => Promise<void>;
  /** Told how each turn ended (functions/turn-log.ts: the log line and the metrics). */
  observeTurn?: (outcome: TurnObservation) => void;
  /**
   * Told what a manual compaction's summary used (POST .../compact, POST /v1/responses/compact),
   * with the model that wrote it (functions/turn-log.ts: the metrics). A turn's own compaction
   * is told with the turn (`TurnObservation.compaction`).
   */
  observeCompaction?: (spend: CompactionSpend) => void;
  /**
   * The spend of the request's scoped token when it carries a budget: checked before a turn
   * is stored, charged after it completed (lib/ledger/token-spend.ts). None: no token budget.
   */
  tokenSpend?: TokenSpend;
  /**
   * The spend record of a token budget a background turn's record names (`token_budget`: the
   * token that claimed it), which its runner charges; none: background turns charge no token.
   */
  spendOf?: (budget: TokenBudget) => TokenSpend;
  /**
   * Told a background turn that completed having compacted its session, its completion landed,
   * before its runner journals its end (functions/services.ts: the OpenAI facade's compaction
   * index, lib/openai/compaction-index.ts, as a foreground response's create writes it): a
   * reader of the turn's receipt sees it completed meanwhile. A failure is logged: the turn
   * stays completed.
   */
  onBackgroundCompaction?: (compacted: CompactedTurn) => Promise<void>;
  /** Where a turn's spans go (lib/turn/trace.ts; functions/tracing.ts); without it, nowhere. */
  tracer?: Tracer;
  /**
   * The turn attempts this process runs (one registry per app, functions/service-inputs.ts): each attempt
   * is in it while it runs, and a close the session log writes here stops it at once
   * (lib/turn/running.ts). Without it, only a lease renewal finds a close.
   */
  running?: RunningTurns;
  /** Where webhook events go, durably (present when WEBHOOK_SECRET is set; lib/webhooks/). */
  webhookSink?: WebhookSink;
}

/**
 * What `observeTurn` is told of one runTurn (the log line, the metrics, the span's end): how
 * it ended, `replayed` when it answered a repeated Idempotency-Key from storage, `queued` for
 * an input the busy policy queued (lib/turn/busy.ts); `turn` and `model` are null when it
 * failed before its claim landed, and for a queued input. `first_output_ms` (from the
 * start to the first streamed output) only for turns whose model streamed: streamed to a client,
 * or in the background (to its journal).
 */
export interface TurnObservation {
  session_id: string;
  turn: number | null;
  status: 'completed' | 'failed' | 'replayed' | 'queued';
  error_code: string | null;
  model: string | null;
  usage: TurnUsage | null;
  /**
   * What the summary of a compaction in the turn used, and the model that wrote it: told
   * whatever the turn's status (the summary's call was made), but not for a replay.
   */
  compaction: CompactionSpend | null;
  duration_ms: number;
  first_output_ms: number | null;
  request: TurnRequest;
  output: OutputItem[];
}

/** A completed background turn that compacted its session (`onBackgroundCompaction`). */
export interface CompactedTurn {
  /** The session's id and creation time (its incarnation). */
  session: { id: string; created_at: string };
  /** The session's generation the turn was taken in. */
  generation: string;
  response: TurnResponse;
  /** The budgeted token the turn is charged to (its record names it), '' for none. */
  caller: string;
}

/** What one compaction's summary used, and the model that wrote it. */
export interface CompactionSpend {
  model: string;
  usage: TurnUsage;
}

export type TurnEvent =
  /**
   * `first_seq`: the seq the turn's first output item gets. `replay`: a stored turn answered
   * again by its Idempotency-Key (its events are not the journal's: neither journaled nor numbered).
   */
  | { event: 'turn.started'; data: { turn: number; first_seq: number }; replay?: true }
  /** `logprobs`: the delta's tokens', when the request asked for them and the model gave them. */
  | { event: 'output_text.delta'; data: { delta: string; logprobs?: TokenLogprob[] } }
  /** A function call began; its argument pieces follow, then its output_item.done (the whole call). */
  | { event: 'function_call.started'; data: { call_id: string; name: string } }
  | { event: 'function_call_arguments.delta'; data: { call_id: string; delta: string } }
  /** A block of the model's reasoning ended: it is in the `reasoning` of the next output_item.done. */
  | { event: 'reasoning.done'; data: { item: ReasoningItem } }
  | { event: 'output_item.done'; data: { item: OutputItem } }
  | { event: 'turn.completed'; data: TurnResponse }
  | { event: 'error'; data: { error: StoredError }; cause: unknown };
