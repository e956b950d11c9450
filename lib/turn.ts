import { TailgateError, TurnClosedError, AbortedError, ReplayedError } from './errors.ts';
import type { Item } from './items.ts';
import type { ModelRequest } from './models/model.ts';
import type { DeliveredNotice } from './inbox/inbox.ts';
import type { BeginTurnResult, SessionLog } from './session/session-log.ts';
import { NOTHING_UNDELIVERED, type Undelivered } from './session/records.ts';
import { sha256Hex } from './hash.ts';
import { NotFoundError } from './errors.ts';
import { preparePrompt, tailRequirement } from './strategies/index.ts';
import {
  checkPromptFits,
  compactionSizes,
  planCompaction,
  summarizeContext,
  truncatePrompt,
  type Truncation,
} from './compaction/index.ts';
import type { HistoryAggregates } from './strategies/aggregates.ts';
import { countPromptTokens } from './tokens/token-counter.ts';
import { resolveTokenBudget } from './tokens/model-limits.ts';
import { promptShape } from './prompt-shape.ts';
import type { TurnServices, TurnRequest, TurnContext, TurnResponse, TurnEvent } from './turn/types.ts';
import {
  type TurnPlan,
  packOptions,
  sessionStrategyPlan,
  planTurn,
  checkRequest,
  CONTEXT_REQUIREMENT,
} from './turn/plan.ts';
import { withSummary, compactionContext, withInstructions, inboxMessage, promptCharacters } from './turn/prompt.ts';
import { errorRecord, requestRecord, type TurnReceipt, buildReceipt, noticeRecord } from './turn/receipt.ts';
import { streamModel, EventChannel } from './turn/stream.ts';
export type {
  TurnSessionLog,
  TurnServices,
  TurnRequest,
  TurnContext,
  TurnResponse,
  TurnEvent,
} from './turn/types.ts';
export { resolveStrategyNames, packOptions, sessionStrategyPlan } from './turn/plan.ts';
export { promptCharacters } from './turn/prompt.ts';
export { errorRecord, seqRanges } from './turn/receipt.ts';
export { previewPrompt } from './turn/preview.ts';

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

/** How often (in log records) a completed turn starts packing in the background. */
const PACK_EVERY_RECORDS = 4;

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

async function executeTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: { idempotencyKey?: string },
  emit?: (event: TurnEvent) => void,
): Promise<TurnResponse> {
  const { sessions } = services;
  checkRequest(services, request);
  const input: Item[] =
    typeof request.input === 'string' ? [{ type: 'message', role: 'user', content: request.input }] : request.input;

  const begun = await sessions.beginTurn(sessionId, {
    input,
    ...(options.idempotencyKey !== undefined
      ? { idempotencyKey: options.idempotencyKey, requestHash: requestHash(input, request) }
      : {}),
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
  const renewal = setInterval(
    () => {
      if (Date.now() > renewUntil) return clearInterval(renewal);
      sessions
        .renewLease(turn)
        .catch((error: unknown) => services.log('tailgate: could not renew a turn lease', error));
    },
    Math.max(1, Math.floor(services.config.turnLeaseMs / 3)),
  );
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
    const requirement = turn.context
      ? CONTEXT_REQUIREMENT
      : tailRequirement(plan.strategies, plan.strategyConfig, turn.aggregates);
    let history = await sessions.readContext(turn, requirement);
    let aggregates: HistoryAggregates | undefined = turn.context ? undefined : turn.aggregates;

    let delivered: DeliveredNotice[] = [];
    let carried: DeliveredNotice[] = [];
    if (plan.strategies.includes('inbox')) {
      // Earlier turns' notices first (those of turns that died are found in the inbox's
      // delivery records), then what this turn consumes.
      const recovered =
        undelivered.lost_turns.length > 0
          ? await services.inbox.recover(sessionId, undelivered.lost_turns, turn.turn)
          : [];
      carried = [...undelivered.notices, ...recovered];
      undelivered = { notices: carried, lost_turns: [] };
      const consumed = await services.inbox.consume(sessionId, {
        turn: turn.turn,
        sessionExists: true,
        since: session.created_at,
      });
      delivered = [...carried, ...consumed.delivered];
      undelivered = { notices: delivered.map(undeliveredRecord), lost_turns: [] };
      if (consumed.abort) {
        const { abort } = consumed;
        const error = new AbortedError(abort.reason, {
          reason: abort.reason,
          notice: abort.name,
          stored_as: abort.stored_as,
          turn: turn.turn,
        });
        await sessions.completeTurn(turn, {
          status: 'aborted',
          output: [],
          receipt: {
            strategies: plan.strategies,
            notices: delivered.map(noticeRecord),
            abort: { name: abort.name, stored_as: abort.stored_as, reason: abort.reason },
          },
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
      const { prompt, cacheBreakpoint } = withInstructions(
        session.instructions,
        prepared.items,
        prepared.stablePrefixLength,
      );
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
        built = {
          prepared: {
            ...built.prepared,
            items: built.prepared.items.filter((item) => item.seq === undefined || !gone.has(item.seq)),
          },
          cacheBreakpoint: cut.cacheBreakpoint,
          hydrated: cut.prompt,
        };
      }
    }
    // A model with a known window never gets a prompt that must fail (context_too_large).
    const promptTokens = Number.isFinite(budget.promptLimit)
      ? checkPromptFits(built.hydrated, plan.tools, budget)
      : undefined;
    const { prepared, cacheBreakpoint, hydrated } = built;
    const context: TurnContext = {
      strategies: prepared.strategies,
      items_in_prompt: hydrated.length,
      prompt_chars: promptCharacters(hydrated),
      ...prepared.stats,
      notices_delivered: delivered.map((notice) => notice.name),
      ...(compacting
        ? compactionContext(
            promptTokens ?? countPromptTokens(hydrated, plan.tools, budget.counter),
            turn.context,
            compaction,
          )
        : {}),
      ...(truncation ? { truncation } : {}),
    };
    receipt = {
      ...buildReceipt(plan, history, prepared.items, delivered, context),
      prompt: promptShape(
        hydrated,
        plan.tools,
        delivered.map((notice) => notice.name),
      ),
    };

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
    const result = emit
      ? await streamModel(plan.model, modelRequest, firstSeq, emit)
      : await plan.model.generate(modelRequest);

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
      const refresh =
        !turn.context &&
        sessions.needsView(
          turn,
          (after) => tailRequirement(activePlan.strategies, activePlan.strategyConfig, after),
          stored,
        );
      if (refresh || turn.record % PACK_EVERY_RECORDS === 0)
        await sessions.pack(sessionId, { ...packOptions(activePlan), refresh });
    });
    return response;
  } catch (error) {
    // Closed by someone else (lease, cancel, a delete): the notices this turn took from the
    // inbox or took over go back (the closer's completion carries the older ones on).
    if (error instanceof TurnClosedError || error instanceof NotFoundError) {
      const taken = undelivered.notices.filter(
        (notice) => !turn.undelivered.notices.some((earlier) => earlier.stored_as === notice.stored_as),
      );
      if (taken.length > 0) await services.inbox.giveBack(sessionId, taken, turn.turn);
    }
    // Closed by someone else, by the abort itself, or deleted: nothing more to store.
    if (error instanceof AbortedError || error instanceof TurnClosedError || error instanceof NotFoundError)
      throw error;
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
      if (!(await sessions.exists(turn.scope).catch(() => true)))
        throw new NotFoundError(`session ${sessionId} was deleted during turn ${turn.turn}`, { id: sessionId });
    }
    throw error;
  } finally {
    clearInterval(renewal);
  }
}

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
  return sha256Hex(
    JSON.stringify({
      input,
      settings: Object.fromEntries(Object.entries(settings).sort(([a], [b]) => a.localeCompare(b))),
    }),
  );
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
