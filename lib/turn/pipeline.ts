import { idGeneration } from '../session/log/rewind.ts';
import { ClosedByItsCompletionError } from '../session/log/owner-closed.ts';
import type { ModelResult } from '../models/model.ts';
import type { ClaimAttempt } from '../session/log/claim.ts';
import type { OpenTurn, TurnHistory, TurnOutcome } from '../session/log/types.ts';
import { checkItemSizes } from '../session/item-size.ts';
import { tailRequirement } from '../strategies/index.ts';
import type { HistoryAggregates } from '../strategies/aggregates.ts';
import type { FetchedNotice } from '../inbox/index.ts';
import type { TurnServices, TurnRequest, TurnResponse, TurnEvent, TurnOptions } from './types.ts';
import { observed, type Seen } from './observe.ts';
import {
  type TurnPlan,
  planTurn,
  checkRequest,
  checkTurnModels,
  CONTEXT_REQUIREMENT,
  inputItems,
  packOptions,
  requestHash,
} from './plan.ts';
import { pickUp } from './pickup.ts';
import { replay } from './replay.ts';
import {
  closeAborted,
  closedBefore,
  closeFailed,
  closeTurn,
  promptMoves,
  tellCompaction,
  type Attempt,
} from './close-turn.ts';
import { afterOwnClose } from './own-close.ts';
import { chargeBeforeClose } from './background-charge.ts';
import { requestRecord } from './receipt.ts';
import { gatedModelCall, promptBudget, turnCallOptions } from './model-call.ts';
import { ClaimLost, TurnNotices } from './notices.ts';
import { buildTurnPrompt, promptStart, type PromptInputs, type TurnPrompt } from './turn-prompt.ts';
import { afterResponse, listedAfterTurn } from './after-response.ts';
import { PACK_EVERY_RECORDS } from './append.ts';
import { TURN_STEPS } from './trace.ts';
import { renewLease } from './renewal.ts';
import { CallMeter } from './stopped-spend.ts';
import { storedRequest } from './background.ts';
import { carried, chargeCarried, unlanded } from './unlanded.ts';

/**
 * The turn pipeline: the one place that orders the steps of a turn (docs/ARCHITECTURE.md,
 * "The turn pipeline"; the storage order in docs/STORAGE.md, "Turn").
 *
 *  1. resolve everything a bad request could fail on (strategy names, thresholds, the model
 *     id) before anything is written, so a 400 stores nothing;
 *  2. read the head for the claim (config, listing, newest record, view, `idem/`) while the
 *     inbox is listed and its notices read: two round trips; or replay the stored response
 *     of a repeated Idempotency-Key (no model call, no inbox consumption);
 *  3. start the claim's create-only put, and without waiting for it: read the history from
 *     the view, plan the notices, build the prompt, call the model;
 *  4. the claim landed, then the notices moved: only then is anything of the call emitted
 *     (`turn.started` first); a lost claim aborts the call and the turn starts again from 2,
 *     a notice that did not move aborts it and the prompt is built again without it. What
 *     needs the turn's number first waits for the claim: an `abort` notice, notices of turns
 *     closed by others, an in-turn compaction;
 *  5. store the output and a compact receipt of what the model saw (hashed while the model
 *     answers), which closes the turn.
 *
 * A failure after the claim landed closes the turn as failed (the input stays stored) and
 * rethrows.
 */

/**
 * Runs one turn and returns the API's 200 body; with `emit`, streams its events as they come
 * (lib/turn/stream-turn.ts). Replays the stored response (or error) of a repeated
 * Idempotency-Key without calling the model or consuming the inbox.
 *
 * @example
 * const response = await runTurn(services, 's1', { input: 'hello' });
 * response.output[0] // { type: 'message', role: 'assistant', content: 'echo: hello', seq: 2 }
 */
export async function runTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: TurnOptions = {},
  emit?: (event: TurnEvent) => void,
): Promise<TurnResponse> {
  return observed(services, sessionId, request, emit, (timed, seen) =>
    takeTurn(services, sessionId, request, options, timed, seen),
  );
}

async function takeTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: TurnOptions,
  emit: ((event: TurnEvent) => void) | undefined,
  seen: Seen,
): Promise<TurnResponse> {
  checkRequest(services, request);
  const { background } = options;
  // Its images and files are checked now and stored once the claim's checks let the turn run.
  const attachments = background ? undefined : services.sessions.checkAttachments(inputItems(request));
  const input = attachments?.items ?? [];
  // A budgeted token's spend, read with the claim's reads (a background turn's: checked at its claim, in its record).
  const spend = background ? undefined : services.tokenSpend;
  const spent = spend?.read();
  spent?.catch(() => undefined);
  // A retake is compared under its key as asking the input it takes again (TurnOptions.retaken).
  const asked = options.retaken ? () => services.sessions.checkAttachments([...options.retaken!]).items : () => input;
  const claim = services.sessions.claimTurn(sessionId, {
    input,
    ...(options.idempotencyKey !== undefined
      ? { idempotencyKey: options.idempotencyKey, requestHash: requestHash(asked(), request) }
      : {}),
    request: requestRecord(request, options),
    ...(options.afterTurn !== undefined ? { afterTurn: options.afterTurn } : {}),
    ...(options.retake ? { retake: true } : {}),
    ...(options.onBusy ? { onBusy: options.onBusy } : {}),
    ...(options.enqueues ? { enqueues: true } : {}),
    ...(options.onLapsed ? { onLapsed: options.onLapsed } : {}),
    // An unrunnable model (no provider key, or unpriced under a cost budget) or a spent budget stores nothing.
    check: async (config) => {
      checkTurnModels(services, request, config);
      options.checkConfig?.(config);
      if (spend && spent) spend.check(await spent);
    },
    // Once nothing refuses the turn (a busy session neither), before its record; its prompt reads the request's bytes.
    ...(attachments?.store ? { beforePut: attachments.store } : {}),
    ...(background ? { writer: background.writer, adopt: background.turn } : {}),
  });
  // Carried from an attempt whose claim was lost to the next: the call it aborted is billed too.
  let meter = new CallMeter();
  // The last attempt whose claim was lost: `meter` carries its calls on (charged if none runs after).
  let lost: Attempt | undefined;
  for (;;) {
    // Read again for every attempt: what an attempt read is as old as its claim's reads.
    const fetched = fetchInbox(services, sessionId, request);
    const attempt = await seen.trace
      .step(TURN_STEPS.claim, () => claim.next())
      .catch(carried(services, lost, meter, seen));
    if (attempt.kind === 'replay') {
      chargeCarried(services, lost, meter, seen);
      seen.replayed = true;
      return replay(services, sessionId, request, attempt, emit);
    }
    const asked = background ? storedRequest(attempt.turn) : request;
    if (background) seen.ran = asked;
    const response = await attemptTurn(services, sessionId, asked, attempt, fetched, emit, options, seen, meter, {
      ...(attachments ? { inputBytes: attachments.bytesOf } : {}),
    });
    if ('lost' in response) {
      lost = response.lost;
      meter = meter.next();
      continue;
    }
    // Before its answer, after its completion (a background turn's: before its completion, turnSteps).
    await spend?.chargeNow(services, response.usage, 1, response.compaction_usage);
    // Before its runner journals the end: a client that saw it may go on from the compaction.
    if (background) await tellCompaction(services, attempt.turn, response);
    return response;
  }
}

/** One claim attempt; `lost` when another writer took its record number (start again). */
async function attemptTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  claimed: Extract<ClaimAttempt, { kind: 'claimed' }>,
  fetched: Promise<FetchedNotice[]> | undefined,
  emit: ((event: TurnEvent) => void) | undefined,
  options: TurnOptions,
  seen: Seen,
  meter: CallMeter,
  media: Pick<PromptInputs, 'inputBytes'>,
): Promise<TurnResponse | { lost: Attempt }> {
  const attempt: Attempt = {
    turn: claimed.turn,
    trace: seen.trace,
    stop: new AbortController(),
    meter,
    ...(options.background ? { background: true as const } : {}),
    ...(options.onLogprobs ? { onLogprobs: options.onLogprobs } : {}),
  };
  options.onClaimed?.(claimed.turn.scope);
  // A background runner holds the lease before it moves a notice or calls a model (a second stops while it renews).
  const { background } = options;
  const leased = background
    ? services.sessions.takeLease(claimed.turn).then(({ etag, takenOver, at }) => {
        if (takenOver) attempt.earlierRun = true;
        attempt.leaseAt = at;
        return Object.assign(background.lease ?? {}, { turn: claimed.turn, etag });
      })
    : undefined;
  const landed = Promise.all([claimed.landed, leased]).then(([ok, held]) => {
    if (ok) attempt.renewal = renewLease(services, claimed.turn, attempt.stop, held);
    return ok;
  });
  landed.catch(() => undefined);
  // A close written in this process stops it at once (lib/turn/running.ts); removed below.
  const unregister = services.running?.add(claimed.turn, attempt.stop);
  try {
    const response = await turnSteps(services, sessionId, request, attempt, landed, fetched, emit, media);
    // Closed by its own completion: the next queued input, if any, goes next.
    afterResponse(services, () => pickUp(services, sessionId, claimed.turn.scope, closedBefore(claimed.turn)));
    return response;
  } catch (error) {
    // Nothing of an attempt whose record did not land was stored: start again (a failed put throws).
    if (error instanceof ClaimLost || !(await landed.catch(unlanded(services, attempt)))) return { lost: attempt };
    // Stopped because someone else closed it: answered as its completion would have been (not
    // once its own completion landed: its webhook event failed, and its totals counted its call).
    const own = error instanceof ClosedByItsCompletionError;
    const cause: unknown = attempt.stop.signal.aborted && !own ? attempt.stop.signal.reason : error;
    return await closeFailed(services, sessionId, attempt, cause).finally(() => {
      // A retake has no input: its turn is named where its output would have begun.
      const { turn, input, scope, counts } = attempt.turn;
      const seq = input[0]?.seq ?? counts.items + 1;
      if (attempt.closedFailed) options.onFailed?.({ turn, seq, generation: idGeneration(scope, seq) });
    });
  } finally {
    seen.turn = attempt.turn.turn;
    if (attempt.plan) seen.model = attempt.plan.model.id;
    const { summaryModel, summaryUsage } = attempt.prompt ?? {};
    if (summaryModel && summaryUsage) seen.compaction = { model: summaryModel, usage: summaryUsage };
    if (attempt.stopped) seen.stopped = attempt.stopped.usage;
    const stopped = attempt.renewal?.stop();
    unregister?.();
    afterResponse(services, () => listedAfterTurn(services, attempt.turn, landed, stopped));
  }
}

async function turnSteps(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  attempt: Attempt,
  landed: Promise<boolean>,
  fetched: Promise<FetchedNotice[]> | undefined,
  emit: ((event: TurnEvent) => void) | undefined,
  media: Pick<PromptInputs, 'inputBytes'>,
): Promise<TurnResponse> {
  const { sessions } = services;
  const { turn, trace } = attempt;
  const plan = planTurn(services, turn.session, request);
  attempt.plan = plan;
  trace.model(plan.model.id);
  const charge = attempt.background ? chargeBeforeClose(services, turn) : undefined;
  const budget = promptBudget(plan.model, plan.strategyConfig, turnCallOptions(request), services.tokenEncoders);
  const read = await trace.step(TURN_STEPS.readContext, () =>
    sessions.readContext(
      turn,
      (aggregates) => historyRequirement(turn, plan, aggregates),
      promptStart(turn, plan, budget, request),
    ),
  );
  const aggregates: HistoryAggregates | undefined = turn.context ? undefined : (read.aggregates ?? turn.aggregates);
  const notices = new TurnNotices(turn, landed, attempt.background ? () => attempt.earlierRun === true : undefined);
  attempt.notices = notices; // before the plan and the abort's close: a failed completion carries what it took
  await notices.plan(services, sessionId, plan, fetched);
  if (notices.abort) await closeAborted(services, turn, plan, notices, notices.abort);
  // completeTurn numbers the output right after the input; the response says so up front.
  const firstSeq = turn.counts.items + 1;
  const started = { event: 'turn.started', data: { turn: turn.turn, first_seq: firstSeq } } as const;
  const inputs: PromptInputs = {
    turn,
    plan,
    budget,
    request,
    history: read.items,
    aggregates,
    readFrom: async (startSeq) => (await sessions.readContext(turn, CONTEXT_REQUIREMENT, null, startSeq)).items,
    notices,
    stop: attempt.stop.signal,
    ...media,
  };
  attempt.prompt = inputs;
  let result: ModelResult | null = null;
  let prompt: TurnPrompt;
  // Built again when a notice the prompt showed did not move.
  do {
    const built = await trace.step(TURN_STEPS.strategies, () => buildTurnPrompt(services, inputs));
    prompt = built;
    attempt.receipt = () => built.receipt(notices.delivered);
    // Not before a background turn holds its lease (see attemptTurn).
    if (attempt.background) await notices.claimed();
    attempt.meter.calling(() => built.promptTokens(), budget.counter);
    const call = trace.step(TURN_STEPS.model, () =>
      gatedModelCall(
        plan.model,
        prompt.modelRequest,
        notices.settle(),
        started,
        emit,
        attempt.stop.signal,
        attempt.meter,
      ),
    );
    built.startReceipt();
    result = await call;
  } while (!result);
  attempt.meter.answered(result.usage, result.output);
  if (result.logprobs) attempt.onLogprobs?.(result.logprobs);
  // Held to MAX_ITEM_BYTES as an append and an import are: failed, nothing of it stored.
  checkItemSizes(result.output, services.config.maxItemBytes, { source: 'output' });
  const context = { ...prompt.context, notices_delivered: notices.delivered.map((notice) => notice.name) };
  const output = result.output.map((item, index) => ({ ...item, seq: firstSeq + index }));
  // With what the calls it aborted spent (a notice they showed did not move, a lost claim).
  const { usage, estimated } = attempt.meter.spent(services.config.modelPrices[plan.model.id])!;
  const summarized = inputs.summaryUsage ? { compaction_usage: inputs.summaryUsage } : {};
  const response: TurnResponse = {
    session_id: sessionId,
    turn: turn.turn,
    output,
    usage,
    ...summarized,
    context,
    ...(result.incomplete ? { incomplete: result.incomplete } : {}),
  };
  const receipt = {
    ...(await prompt.receipt(notices.delivered)),
    usage,
    ...(estimated ? { usage_estimated: true as const } : {}),
    ...summarized,
    ...(result.incomplete ? { incomplete: result.incomplete } : {}),
  };
  const outcome: TurnOutcome = {
    status: 'completed',
    output: result.output,
    usage,
    receipt,
    response,
    // Delivered now; without the inbox strategy, earlier notices wait for a turn that has it.
    undelivered: plan.strategies.includes('inbox')
      ? { notices: [], lost_turns: notices.stillLost }
      : notices.undelivered,
    ...promptMoves(inputs),
  };
  // A background turn's charge lands first: a client that polls the turn sees it completed once charged.
  const close = () => trace.step(TURN_STEPS.complete, () => closeTurn(services, turn, outcome));
  const stored = charge ? await charge(usage, inputs.summaryUsage, close) : await close();
  await afterOwnClose(services, sessionId, attempt);
  // The delivery records of notices consumed by earlier turns name the turn that carried them.
  const { carried } = notices;
  if (carried.length > 0) afterResponse(services, () => services.inbox.recordCarrier(sessionId, carried, turn.turn));
  schedulePacking(services, sessionId, turn, plan, read, outcome, stored);
  return response;
}

/** What the strategies need of the history; a compacted context is read whole from its start. */
function historyRequirement(turn: OpenTurn, plan: TurnPlan, aggregates: HistoryAggregates) {
  return turn.context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates);
}

/**
 * Lists the inbox and reads its notices alongside the claim's reads, unless the request's
 * strategies leave `inbox` out (the session's may too: then the read is unused).
 */
function fetchInbox(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
): Promise<FetchedNotice[]> | undefined {
  if (request.strategies !== undefined && !request.strategies.includes('inbox')) return undefined;
  const fetched = services.inbox.fetch(sessionId);
  fetched.catch(() => undefined);
  return fetched;
}

/**
 * After the response: pack every fourth record (a view every few records, segments of
 * several), and at once when the next turn's strategies need less than the view holds (this
 * turn's calls began a new epoch), when this turn read past it, or when the model made a
 * call: the next turn then finds no call after its view, so it reads no shard of the repeat
 * index and stays at 2 round trips before its model call (docs/STORAGE.md). Not after a
 * compacted context (the claim's, or the one this turn stored): it is read whole.
 */
function schedulePacking(
  services: TurnServices,
  sessionId: string,
  turn: OpenTurn,
  plan: TurnPlan,
  read: TurnHistory,
  outcome: TurnOutcome,
  stored: Awaited<ReturnType<TurnServices['sessions']['completeTurn']>>,
): void {
  afterResponse(services, async () => {
    const refresh =
      !(outcome.context ?? turn.context) &&
      (read.readPastView ||
        stored.some((item) => item.type === 'function_call') ||
        services.sessions.needsView(
          turn,
          (after) => tailRequirement(plan.strategies, plan.strategyConfig, after),
          stored,
        ));
    if (refresh || turn.record % PACK_EVERY_RECORDS === 0)
      await services.sessions.pack(sessionId, { ...packOptions(plan), refresh });
  });
}
