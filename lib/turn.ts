import type { ServiceConfig } from './config.ts';
import { storedErrorCode, TailgateError } from './errors.ts';
import { outputLength, type Item, type PromptItem, type Tool } from './items.ts';
import { ModelError, type Model, type ModelOutputItem, type ModelRequest, type ModelResult, type ModelUsage } from './models/model.ts';
import type { DeliveredNotice, Inbox } from './inbox/inbox.ts';
import type { BeginTurnResult, OpenTurn, PackOptions, SessionLog, SessionRecord } from './session/session-log.ts';
import { TurnClosedError } from './session/turn-errors.ts';
import type { Undelivered } from './session/records.ts';
import { sha256Hex } from './hash.ts';
import { NotFoundError } from './errors.ts';
import { builtInRegistry, preparePrompt, resolveStrategies, resolveStrategyConfig, tailRequirement } from './strategies/index.ts';
import type { StrategyConfig } from './strategies/strategy-config.ts';
import { checkPromptFits, compactionSizes, planCompaction, summarizeContext, summaryMessage, truncatePrompt, type Truncation } from './compaction/index.ts';
import type { ContextStart } from './session/records.ts';
import type { HistoryAggregates } from './strategies/aggregates.ts';
import { countPromptTokens } from './tokens/token-counter.ts';
import { resolveTokenBudget } from './tokens/model-limits.ts';
import type { TokenEncoders } from './tokens/token-counter.ts';
import { promptShape, type PromptShape } from './prompt-shape.ts';

/**
 * The turn pipeline: the one place that orders the steps of a turn (docs/ARCHITECTURE.md, "The turn pipeline").
 *
 *  1. read the session (404), and resolve everything a bad request could fail on (strategy
 *     names, thresholds, the model id) before anything is written, so a 400 stores nothing;
 *  2. claim the turn with its input (durable before anything can fail) or replay the stored
 *     response of a repeated Idempotency-Key (no model call, no inbox consumption);
 *  3. read the history from the tail, only as far as the strategies need;
 *  4. consume the inbox when `inbox` is in the strategy list; an `abort` notice closes the
 *     turn as aborted and no model is called;
 *  5. apply the strategies, put the session instructions first, fetch out-of-line payloads
 *     the strategies kept whole;
 *  5b. with `compact` in the list: count the prompt's tokens; above the trigger, summarize
 *     the oldest part of the context, move the context start, and prepare again; then, for
 *     every turn of a model with a known window, refuse a prompt that still does not fit
 *     (context_too_large) instead of calling the provider;
 *  6. call the model (streaming or not);
 *  7. store the output and a compact receipt of what the model saw, which closes the turn.
 *
 * A failure after the claim closes the turn as failed (the input stays stored) and rethrows.
 */

export type StoredError = { code: string; message: string; details?: unknown };

/** The part of the session log the pipeline uses (a Pick, so tests can hand in a wrapper). */
export type TurnSessionLog = Pick<
  SessionLog,
  'get' | 'beginTurn' | 'readContext' | 'needsView' | 'previewContext' | 'hydrate' | 'completeTurn' | 'pack' | 'renewLease' | 'exists'
> &
  Partial<Pick<SessionLog, 'commitTurnContext'>>;

/** The part of the inbox the pipeline uses. */
export type TurnInbox = Pick<Inbox, 'consume' | 'peek' | 'recover' | 'recordCarrier' | 'giveBack'>;

/** Everything one request's pipeline works with, built per request by the runtime entry. */
export interface TurnServices {
  sessions: TurnSessionLog;
  inbox: TurnInbox;
  config: ServiceConfig;
  /** The plain string environment (strategy thresholds, PROMPT_STRATEGY). */
  env: Record<string, string | undefined>;
  /** Resolves a model id (throws a 400-coded error for an unknown one). */
  model: (id: string) => Model;
  /** Runs work that must outlive the response (waitUntil on Workers). */
  background: (task: Promise<unknown>) => void;
  log: (message: string, details?: unknown) => void;
  /** Real tokenizers the runtime provides (Node, Deno); the approximation without them. */
  tokenEncoders?: TokenEncoders;
}

/** The body of POST /v1/sessions/:id/turns, validated. */
export interface TurnRequest {
  input: string | Item[];
  model?: string;
  strategies?: string | string[];
  strategy_config?: Record<string, unknown>;
  tools?: Tool[];
  max_output_tokens?: number;
  temperature?: number;
  /** Passed to providers that route prompt caching by a key (OpenAI's `prompt_cache_key`). */
  prompt_cache_key?: string;
  /**
   * `auto`: a prompt over the model's window drops its oldest tool pairs, then its oldest
   * messages outside the newest user turn, until it fits (lib/compaction/truncate-prompt.ts);
   * otherwise it is refused (context_too_large).
   */
  truncation?: 'auto' | 'disabled';
}

/** The API's `context` object. */
export interface TurnContext {
  strategies: string[];
  items_in_prompt: number;
  prompt_chars: number;
  tool_calls_total: number;
  kept_full: number;
  compacted: number;
  dropped: number;
  notices_delivered: string[];
  /** With `compact` in the list: the prompt's tokens (as counted for the budget). */
  prompt_tokens?: number;
  /** With a compacted context: the first seq of the current context. */
  context_start_seq?: number;
  /** Set when this turn compacted: the seqs its summary replaced. */
  compaction?: { start_seq: number; summarized: { first_seq: number; last_seq: number }; interrupted: string[] };
  /** Set when `truncation: "auto"` dropped items to fit the window. */
  truncation?: Truncation;
}

export type OutputItem = ModelOutputItem & { seq: number };

/** The API's 200 body of a turn. */
export interface TurnResponse {
  session_id: string;
  turn: number;
  output: OutputItem[];
  usage: ModelUsage;
  context: TurnContext;
}

export type TurnEvent =
  /** `first_seq`: the seq the turn's first output item gets. */
  | { event: 'turn.started'; data: { turn: number; first_seq: number } }
  | { event: 'output_text.delta'; data: { delta: string } }
  | { event: 'output_item.done'; data: { item: OutputItem } }
  | { event: 'turn.completed'; data: TurnResponse }
  | { event: 'error'; data: { error: StoredError }; cause: unknown };

/** The turn was ended by an `abort` notice (409). */
export class AbortedError extends TailgateError {
  constructor(reason: string, details: { reason: string; notice: string; stored_as: string; turn: number }) {
    super('aborted', `the turn was aborted: ${reason}`, details);
    this.name = 'AbortedError';
  }
}

/** A replayed turn that had failed: the stored error, rethrown with its code. */
export class ReplayedError extends TailgateError {
  constructor(error: StoredError) {
    super(storedErrorCode(error.code), error.message, error.details);
    this.name = 'ReplayedError';
  }
}

/**
 * Runs one turn and returns the API's 200 body. Replays the stored response (or error) of a
 * repeated Idempotency-Key without calling the model or consuming the inbox.
 *
 * @example
 * const response = await runTurn(services, 's1', { input: 'hello' }, {});
 * response.output[0] // { type: 'message', role: 'assistant', content: 'echo: hello', seq: 2 }
 */
export function runTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string } = {},
): Promise<TurnResponse> {
  return executeTurn(services, sessionId, request, options);
}

/**
 * The streaming variant of {@link runTurn}. The pipeline starts at once and runs on its own:
 * it does not wait for the consumer, so a client that disconnects mid-stream does not stop
 * the turn from completing and being stored. `done` settles when the turn is stored (or has
 * failed); keep it alive (waitUntil) on runtimes that end work with the response.
 *
 * Events: turn.started {turn} (right before the model call, so every client error and an
 * abort come earlier, as a thrown error), output_text.delta {delta}, output_item.done {item},
 * then turn.completed {the 200 body} or error {error}.
 */
export function streamTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string } = {},
): { events: AsyncIterable<TurnEvent>; done: Promise<void> } {
  const channel = new EventChannel<TurnEvent>();
  let started = false;
  const emit = (event: TurnEvent) => {
    if (event.event === 'turn.started') started = true;
    channel.push(event);
  };
  const done = executeTurn(services, sessionId, request, options, emit).then(
    (response) => channel.push({ event: 'turn.completed', data: response }),
    (error: unknown) => {
      // Before turn.started the route answers with the error's status (and onError logs
      // what needs logging); after it, the error only travels as an event, so log it here.
      if (started) services.log('tailgate: streamed turn failed', error);
      channel.push({ event: 'error', data: { error: errorRecord(error) }, cause: error });
    },
  );
  void done.finally(() => channel.close());
  return { events: channel, done };
}

/**
 * The strategy names a list resolves to (undefined: PROMPT_STRATEGY from env, else the
 * default list). Throws UnknownStrategyError (400, listing the known names) for an unknown
 * one, so a bad list is refused before anything is stored.
 */
export function resolveStrategyNames(spec: string | readonly string[] | undefined, env: Record<string, string | undefined>): string[] {
  return resolveStrategies(spec, builtInRegistry, env).map((strategy) => strategy.name);
}

/** How often (in log records) a completed turn starts packing in the background. */
const PACK_EVERY_RECORDS = 4;

interface TurnPlan {
  strategies: string[];
  strategyConfig: StrategyConfig;
  model: Model;
  tools: Tool[];
}

/** The strategies, thresholds, model and tools of a turn, from the request over the session. */
/**
 * Appends items without a model turn (POST /items) and, every few records, packs the log in
 * the background as turns do, so the next turn finds a recent view.
 */
export async function appendItems(
  services: Pick<TurnServices, 'env' | 'background'> & { sessions: Pick<SessionLog, 'append' | 'get' | 'pack'> },
  sessionId: string,
  items: Item[],
): Promise<{ first_seq: number; last_seq: number }> {
  const { first_seq, last_seq, record } = await services.sessions.append(sessionId, items);
  if (record % PACK_EVERY_RECORDS === 0) {
    afterResponse(services, async () => {
      const session = await services.sessions.get(sessionId);
      await services.sessions.pack(sessionId, packOptions(sessionStrategyPlan(services.env, session)));
    });
  }
  return { first_seq, last_seq };
}

/**
 * Hands `task` to `background` (waitUntil on Workers) to start on a timer, so its storage
 * calls come after the response has been produced, not among the request's own.
 */
function afterResponse(services: Pick<TurnServices, 'background'>, task: () => Promise<unknown>): void {
  services.background(new Promise((resolve) => setTimeout(resolve, 0)).then(task));
}

/**
 * What `pack` needs to write a view the next turns can read instead of the log: the tail
 * their strategies need (the plan of a turn, or a session's settings without a request).
 */
export function packOptions(plan: Pick<TurnPlan, 'strategies' | 'strategyConfig'>): PackOptions {
  return { requirement: (aggregates, context) => (context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates)) };
}

/** The strategies and thresholds of a session's turns when the request sets none. */
export function sessionStrategyPlan(
  env: Record<string, string | undefined>,
  session: Pick<SessionRecord, 'strategies' | 'strategy_config'>,
): Pick<TurnPlan, 'strategies' | 'strategyConfig'> {
  return {
    strategies: resolveStrategyNames(session.strategies ?? undefined, env),
    strategyConfig: resolveStrategyConfig({ env, session: session.strategy_config }),
  };
}

function planTurn(services: TurnServices, session: SessionRecord, request: Pick<TurnRequest, 'model' | 'strategies' | 'strategy_config' | 'tools'>): TurnPlan {
  const strategies = resolveStrategyNames(request.strategies ?? session.strategies ?? undefined, services.env);
  const strategyConfig = resolveStrategyConfig({
    env: services.env,
    session: session.strategy_config,
    request: request.strategy_config,
  });
  const model = services.model(request.model ?? session.model ?? services.config.defaultModel);
  return { strategies, strategyConfig, model, tools: request.tools ?? session.tools };
}

/**
 * Everything the request itself can be refused for (its strategy list, thresholds and model,
 * and the deployment's defaults), checked before the turn is claimed so a refused request
 * stores nothing. The session's own settings were checked when they were written, so the
 * turn reads the session only once, as part of its claim.
 */
function checkRequest(services: TurnServices, request: Pick<TurnRequest, 'model' | 'strategies' | 'strategy_config'>): void {
  resolveStrategyNames(request.strategies, services.env);
  resolveStrategyConfig({ env: services.env, request: request.strategy_config });
  if (request.model !== undefined) services.model(request.model);
}

async function executeTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string },
  emit?: (event: TurnEvent) => void,
): Promise<TurnResponse> {
  const { sessions } = services;
  checkRequest(services, request);
  const input: Item[] = typeof request.input === 'string' ? [{ type: 'message', role: 'user', content: request.input }] : request.input;

  const begun = await sessions.beginTurn(sessionId, {
    input,
    ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey, requestHash: requestHash(input, request) } : {}),
    request: requestRecord(request),
  });
  if (begun.kind === 'replay') return replay(begun, emit);
  const turn = begun.turn;
  const session = turn.session;

  // From the claim on, the turn holds the session: renew its lease while it runs, and close
  // it on any failure, so a session is never left locked by a turn that is not running.
  // Renewed only as long as a working turn can take (a summary and an answer, each within the
  // model timeout): a turn hung on a call that never returns lets its session go.
  const renewUntil = Date.now() + 2 * services.config.modelTimeoutMs + services.config.turnLeaseMs;
  const renewal = setInterval(() => {
    if (Date.now() > renewUntil) return clearInterval(renewal);
    sessions.renewLease(turn).catch((error: unknown) => services.log('tailgate: could not renew a turn lease', error));
  }, Math.max(1, Math.floor(services.config.turnLeaseMs / 3)));
  let plan: TurnPlan | undefined;
  let receipt: TurnReceipt | undefined;
  // Notices consumed (now or by earlier turns) that no model has seen yet.
  let undelivered: Undelivered = turn.undelivered;
  try {
    plan = planTurn(services, session, request);
    const budget = resolveTokenBudget(plan.model.id, plan.strategyConfig, {
      ...(request.max_output_tokens !== undefined ? { maxOutputTokens: request.max_output_tokens } : {}),
      ...(services.tokenEncoders ? { encoders: services.tokenEncoders } : {}),
    });
    // A compacted context is read whole from its start, and is the strategies' whole history.
    const requirement = turn.context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, turn.aggregates);
    let history = await sessions.readContext(turn, requirement);
    let aggregates: HistoryAggregates | undefined = turn.context ? undefined : turn.aggregates;

    let delivered: DeliveredNotice[] = [];
    let carried: DeliveredNotice[] = [];
    if (plan.strategies.includes('inbox')) {
      // Earlier turns' notices first (those of turns that died are found in the inbox's
      // delivery records), then what this turn consumes.
      const recovered = undelivered.lost_turns.length > 0 ? await services.inbox.recover(sessionId, undelivered.lost_turns, turn.turn) : [];
      carried = [...undelivered.notices, ...recovered];
      undelivered = { notices: carried, lost_turns: [] };
      const consumed = await services.inbox.consume(sessionId, { turn: turn.turn, sessionExists: true, since: session.created_at });
      delivered = [...carried, ...consumed.delivered];
      undelivered = { notices: delivered.map(undeliveredRecord), lost_turns: [] };
      if (consumed.abort) {
        const { abort } = consumed;
        const error = new AbortedError(abort.reason, { reason: abort.reason, notice: abort.name, stored_as: abort.stored_as, turn: turn.turn });
        await sessions.completeTurn(turn, {
          status: 'aborted',
          output: [],
          receipt: { strategies: plan.strategies, notices: delivered.map(noticeRecord), abort: { name: abort.name, stored_as: abort.stored_as, reason: abort.reason } },
          error: errorRecord(error),
          undelivered,
        });
        throw error;
      }
    }

    const activePlan = plan;
    const build = async () => {
      const prepared = preparePrompt(withSummary(turn.context, history), activePlan.strategies, {
        config: activePlan.strategyConfig,
        env: services.env,
        ...(aggregates ? { aggregates } : {}),
        inbox: (items) => [...items, ...delivered.map((notice) => inboxMessage(notice.content))],
      });
      const { prompt, cacheBreakpoint } = withInstructions(session.instructions, prepared.items, prepared.stablePrefixLength);
      return { prepared, cacheBreakpoint, hydrated: await sessions.hydrate(turn.scope, prompt) };
    };
    let built = await build();
    const compacting = plan.strategies.includes('compact');
    let compaction: TurnContext['compaction'];
    if (compacting && Number.isFinite(budget.promptLimit) && sessions.commitTurnContext) {
      const sizes = compactionSizes(budget, plan.strategyConfig);
      if (countPromptTokens(built.hydrated, plan.tools, budget.counter) > sizes.trigger) {
        const cut = planCompaction(history, {
          keepTokens: sizes.keepTokens,
          counter: budget.counter,
          ...(turn.input[0] ? { keepFromSeq: turn.input[0].seq } : {}),
          // Start no older than what the newest records carry, so later turns read the context from them.
          ...(turn.carried[0] ? { earliestStartSeq: turn.carried[0].seq } : {}),
        });
        if (cut) {
          const summaryModel = services.config.summaryModel ? services.model(services.config.summaryModel) : plan.model;
          const next = await summarizeContext(summaryModel, turn.context, cut, {
            maxSummaryTokens: sizes.maxSummaryTokens,
            ...(services.config.summaryPrompt ? { prompt: services.config.summaryPrompt } : {}),
          });
          const stored = await sessions.commitTurnContext(turn, next);
          compaction = { start_seq: stored.start_seq, summarized: stored.summarized, interrupted: stored.interrupted };
          history = history.filter((item) => item.seq === undefined || item.seq >= stored.start_seq);
          aggregates = undefined;
          built = await build();
        }
      }
    }
    // With truncation "auto", the oldest items go until the prompt fits.
    let truncation: Truncation | undefined;
    if (request.truncation === 'auto' && Number.isFinite(budget.promptLimit)) {
      const cut = truncatePrompt(built.hydrated, plan.tools, budget, built.cacheBreakpoint);
      if (cut.truncation) {
        truncation = cut.truncation;
        const gone = new Set(cut.truncation.dropped_seqs);
        built = { prepared: { ...built.prepared, items: built.prepared.items.filter((item) => item.seq === undefined || !gone.has(item.seq)) }, cacheBreakpoint: cut.cacheBreakpoint, hydrated: cut.prompt };
      }
    }
    // A model with a known window never gets a prompt that must fail (context_too_large).
    const promptTokens = Number.isFinite(budget.promptLimit) ? checkPromptFits(built.hydrated, plan.tools, budget) : undefined;
    const { prepared, cacheBreakpoint, hydrated } = built;
    const context: TurnContext = {
      strategies: prepared.strategies,
      items_in_prompt: hydrated.length,
      prompt_chars: promptCharacters(hydrated),
      ...prepared.stats,
      notices_delivered: delivered.map((notice) => notice.name),
      ...(compacting ? compactionContext(promptTokens ?? countPromptTokens(hydrated, plan.tools, budget.counter), turn.context, compaction) : {}),
      ...(truncation ? { truncation } : {}),
    };
    receipt = { ...buildReceipt(plan, history, prepared.items, delivered, context), prompt: promptShape(hydrated, plan.tools, delivered.map((notice) => notice.name)) };

    const modelRequest: ModelRequest = {
      prompt: hydrated,
      tools: plan.tools,
      ...(cacheBreakpoint !== undefined ? { cacheBreakpoint } : {}),
      ...(request.max_output_tokens !== undefined ? { maxOutputTokens: request.max_output_tokens } : {}),
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.prompt_cache_key !== undefined ? { promptCacheKey: request.prompt_cache_key } : {}),
    };
    // completeTurn numbers the output right after the input; the response says so up front.
    const firstSeq = turn.counts.items + 1;
    emit?.({ event: 'turn.started', data: { turn: turn.turn, first_seq: firstSeq } });
    const result = emit ? await streamModel(plan.model, modelRequest, firstSeq, emit) : await plan.model.generate(modelRequest);

    const output = result.output.map((item, index) => ({ ...item, seq: firstSeq + index }));
    const response: TurnResponse = { session_id: sessionId, turn: turn.turn, output, usage: result.usage, context };
    const stored = await sessions.completeTurn(turn, {
      status: 'completed',
      output: result.output,
      receipt: { ...receipt, usage: result.usage },
      response,
      // Delivered now; without the inbox strategy, earlier notices wait for a turn that has it.
      undelivered: plan.strategies.includes('inbox') ? NOTHING_UNDELIVERED : undelivered,
    });
    // The delivery records of notices consumed by earlier turns name the turn that carried them.
    if (carried.length > 0) afterResponse(services, () => services.inbox.recordCarrier(sessionId, carried, turn.turn));
    // After the response: pack every fourth record (a view every few records, segments of
    // several), and at once when the next turn's strategies need less than the view holds
    // (this turn's calls began a new epoch) or this turn read past it.
    afterResponse(services, async () => {
      const refresh = !turn.context && sessions.needsView(turn, (after) => tailRequirement(activePlan.strategies, activePlan.strategyConfig, after), stored);
      if (refresh || turn.record % PACK_EVERY_RECORDS === 0) await sessions.pack(sessionId, { ...packOptions(activePlan), refresh });
    });
    return response;
  } catch (error) {
    // Closed by someone else (lease, cancel, a delete): the notices this turn took from the
    // inbox or took over go back (the closer's completion carries the older ones on).
    if (error instanceof TurnClosedError || error instanceof NotFoundError) {
      const taken = undelivered.notices.filter((notice) => !turn.undelivered.notices.some((earlier) => earlier.stored_as === notice.stored_as));
      if (taken.length > 0) await services.inbox.giveBack(sessionId, taken, turn.turn);
    }
    // Closed by someone else, by the abort itself, or deleted: nothing more to store.
    if (error instanceof AbortedError || error instanceof TurnClosedError || error instanceof NotFoundError) throw error;
    try {
      await sessions.completeTurn(turn, {
        status: 'failed',
        output: [],
        receipt: receipt ?? { strategies: plan?.strategies ?? [] },
        error: errorRecord(error),
        undelivered,
      });
    } catch (closeError) {
      if (closeError instanceof TurnClosedError || closeError instanceof NotFoundError) throw closeError;
      services.log('tailgate: could not close a failed turn', closeError);
    }
    // A storage failure while the session was being deleted is the delete's doing: 404.
    if (!(error instanceof TailgateError) || error.code === 'corrupt_object' || error.code === 'storage_error') {
      if (!(await sessions.exists(turn.scope).catch(() => true))) throw new NotFoundError(`session ${sessionId} was deleted during turn ${turn.turn}`, { id: sessionId });
    }
    throw error;
  } finally {
    clearInterval(renewal);
  }
}

const NOTHING_UNDELIVERED: Undelivered = { notices: [], lost_turns: [] };

/** A delivered notice as a failed turn's completion carries it. */
function undeliveredRecord(notice: DeliveredNotice): Undelivered['notices'][number] {
  return { name: notice.name, stored_as: notice.stored_as, posted_at: notice.posted_at, content: notice.content };
}

/**
 * The SHA-256 of what a keyed turn was asked (input and settings, not `stream`): a retry
 * with the same key and another request is refused.
 */
function requestHash(input: Item[], request: TurnRequest): string {
  const { input: _input, ...settings } = request;
  return sha256Hex(JSON.stringify({ input, settings: Object.fromEntries(Object.entries(settings).sort(([a], [b]) => a.localeCompare(b))) }));
}

async function streamModel(model: Model, request: ModelRequest, firstSeq: number, emit: (event: TurnEvent) => void): Promise<ModelResult> {
  let index = 0;
  for await (const event of model.stream(request)) {
    if (event.type === 'text_delta') emit({ event: 'output_text.delta', data: { delta: event.delta } });
    else if (event.type === 'item_done') emit({ event: 'output_item.done', data: { item: { ...event.item, seq: firstSeq + index++ } } });
    else return event.result;
  }
  throw new ModelError('the model stream ended without a result');
}

function replay(begun: Extract<BeginTurnResult, { kind: 'replay' }>, emit?: (event: TurnEvent) => void): TurnResponse {
  if (begun.status !== 'completed' || begun.response === undefined) {
    throw new ReplayedError(begun.error ?? { code: 'model_error', message: `the original turn ${begun.status}` });
  }
  const response = begun.response as TurnResponse;
  if (emit) {
    emit({ event: 'turn.started', data: { turn: response.turn, first_seq: response.output[0]?.seq ?? 0 } });
    for (const item of response.output) {
      if (item.type === 'message') emit({ event: 'output_text.delta', data: { delta: item.content } });
      emit({ event: 'output_item.done', data: { item } });
    }
  }
  return response;
}

/** What a compacted context's turn reads: everything from the context start. */
const CONTEXT_REQUIREMENT = { toolCalls: 'all' as const, seqs: [] };

/** The history the strategies see: the summary first when the context was compacted. */
function withSummary(context: ContextStart | null, history: PromptItem[]): PromptItem[] {
  return context ? [summaryMessage(context.summary), ...history] : history;
}

function compactionContext(promptTokens: number, context: ContextStart | null, compaction: TurnContext['compaction']): Partial<TurnContext> {
  return {
    prompt_tokens: promptTokens,
    ...(context ? { context_start_seq: context.start_seq } : {}),
    ...(compaction ? { compaction } : {}),
  };
}

/** The session instructions go first, as a system message; the cache breakpoint shifts with them. */
function withInstructions(instructions: string | null, items: PromptItem[], stablePrefixLength: number): { prompt: PromptItem[]; cacheBreakpoint?: number } {
  const prompt: PromptItem[] = instructions ? [{ type: 'message', role: 'system', content: instructions }, ...items] : items;
  const stable = stablePrefixLength + (instructions ? 1 : 0);
  return stable > 0 ? { prompt, cacheBreakpoint: stable - 1 } : { prompt };
}

function inboxMessage(content: string): PromptItem {
  return { type: 'message', role: 'user', content, synthetic: 'inbox' };
}

/** Characters the model is sent: message content, call names and arguments, outputs. */
export function promptCharacters(prompt: PromptItem[]): number {
  let total = 0;
  for (const item of prompt) {
    if (item.type === 'message') total += item.content.length;
    else if (item.type === 'function_call') total += item.name.length + item.arguments.length;
    else total += item.output_ref && item.output === '' ? outputLength(item) : item.output.length;
  }
  return total;
}

/** The error JSON body's inner object, for any thrown value (unknown errors stay generic). */
export function errorRecord(error: unknown): StoredError {
  if (error instanceof TailgateError) {
    return error.details === undefined ? { code: error.code, message: error.message } : { code: error.code, message: error.message, details: error.details };
  }
  return { code: 'internal_error', message: 'internal error' };
}

/** What the turn stores of the request (for the record; replay does not re-run it). */
function requestRecord(request: TurnRequest): Record<string, unknown> {
  const { input: _input, ...rest } = request;
  return rest;
}

interface TurnReceipt {
  model: string;
  strategies: string[];
  /** Seq ranges ("1-40,42") of history items sent whole, compacted, or read and dropped. */
  whole: string;
  compacted: string;
  dropped: string;
  /** Items of the history before the tail that was read: dropped without being read. */
  unread_before: number | null;
  notices: { name: string; stored_as: string; posted_at: string }[];
  context: TurnContext;
  usage?: ModelUsage;
  /** The prompt's item hashes, sizes and synthetic items (lib/prompt-shape.ts). */
  prompt?: PromptShape;
}

/**
 * The compact record of what the model saw: which seqs went in whole, compacted or not at
 * all, and which notices were delivered. Ranges keep it small at any session length.
 */
function buildReceipt(plan: TurnPlan, history: PromptItem[], prompt: PromptItem[], delivered: DeliveredNotice[], context: TurnContext): TurnReceipt {
  const whole: number[] = [];
  const compacted: number[] = [];
  const seen = new Set<number>();
  for (const item of prompt) {
    if (item.seq === undefined) continue;
    seen.add(item.seq);
    (item.compacted ? compacted : whole).push(item.seq);
  }
  const dropped = history.flatMap((item) => (item.seq !== undefined && !seen.has(item.seq) ? [item.seq] : []));
  const firstRead = history.find((item) => item.seq !== undefined)?.seq;
  return {
    model: plan.model.id,
    strategies: plan.strategies,
    whole: seqRanges(whole),
    compacted: seqRanges(compacted),
    dropped: seqRanges(dropped),
    unread_before: firstRead ?? null,
    notices: delivered.map(noticeRecord),
    context,
  };
}

function noticeRecord(notice: DeliveredNotice): { name: string; stored_as: string; posted_at: string } {
  return { name: notice.name, stored_as: notice.stored_as, posted_at: notice.posted_at };
}

/** `[1,2,3,5,7,8]` -> `"1-3,5,7-8"`. */
export function seqRanges(seqs: number[]): string {
  const sorted = [...seqs].sort((a, b) => a - b);
  const parts: string[] = [];
  let start: number | undefined;
  let previous: number | undefined;
  for (const seq of sorted) {
    if (start !== undefined && previous !== undefined && seq === previous + 1) {
      previous = seq;
      continue;
    }
    if (start !== undefined) parts.push(start === previous ? `${start}` : `${start}-${previous}`);
    start = seq;
    previous = seq;
  }
  if (start !== undefined) parts.push(start === previous ? `${start}` : `${start}-${previous}`);
  return parts.join(',');
}

/**
 * What the model would be sent now, with no side effects: nothing is claimed, consumed or
 * written. Pending notices appear where the `inbox` strategy would put them, marked
 * `pending: true`; the context counts them in `notices_pending`, not `notices_delivered`.
 */
export async function previewPrompt(
  services: TurnServices,
  sessionId: string,
  query: { strategies?: string | string[]; strategy_config?: Record<string, unknown> },
): Promise<{ items: PromptItem[]; context: TurnContext & { notices_pending: string[] } }> {
  const session = await services.sessions.get(sessionId);
  const plan = planTurn(services, session, query);
  const { items: history, aggregates, context: contextStart, scope } = await services.sessions.previewContext(sessionId, (aggregates, context) =>
    context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates),
  );
  const pending = plan.strategies.includes('inbox') ? await services.inbox.peek(sessionId) : [];
  const prepared = preparePrompt(withSummary(contextStart, history), plan.strategies, {
    config: plan.strategyConfig,
    env: services.env,
    ...(contextStart ? {} : { aggregates }),
    inbox: (items) => [...items, ...pending.map((notice) => ({ ...inboxMessage(notice.content), pending: true as const }))],
  });
  const { prompt } = withInstructions(session.instructions, prepared.items, prepared.stablePrefixLength);
  const items = await services.sessions.hydrate(scope, prompt);
  return {
    items,
    context: {
      strategies: prepared.strategies,
      items_in_prompt: items.length,
      prompt_chars: promptCharacters(items),
      ...prepared.stats,
      notices_delivered: [],
      notices_pending: pending.map((notice) => notice.name),
      ...(contextStart ? { context_start_seq: contextStart.start_seq } : {}),
    },
  };
}

/** An unbounded single-consumer queue: the producer never waits for the consumer. */
class EventChannel<T> implements AsyncIterable<T> {
  #buffer: T[] = [];
  #closed = false;
  #wake: (() => void) | undefined;

  push(value: T): void {
    if (this.#closed) return;
    this.#buffer.push(value);
    this.#wake?.();
  }

  close(): void {
    this.#closed = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const next = this.#buffer.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (this.#closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}
