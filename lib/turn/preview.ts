import type { Item, PromptItem, Tool } from '../items.ts';
import { tailRequirement } from '../strategies/index.ts';
import type { TurnServices, TurnContext } from './types.ts';
import { planTurn, CONTEXT_REQUIREMENT, type TurnPlan } from './plan.ts';
import type { TurnRequest } from './wire.ts';
import type { LogScope } from '../session/keys.ts';
import type { QueuedInput } from '../session/queued-input.ts';
import { promptBudget } from './model-call.ts';
import { fitTurnPrompt, safetyNetFits, type PromptSource } from './turn-prompt.ts';
import { ContextTooLargeError } from '../compaction/check-prompt-fits.ts';
import { TurnInProgressError } from '../errors.ts';
import { clientError, type ErrorCode } from '../error-codes.ts';
import { budgetRefusal } from '../ledger/budget.ts';
import { roomFor } from './notices.ts';
import { passedOver } from './pickup.ts';
import { countPromptTokens } from '../tokens/token-counter.ts';
import type { ForkSketch, SessionRecord } from '../session/session-log.ts';
import type { RewindOptions } from '../session/log/rewind.ts';
import { refuseOverToolLimit } from '../models/model.ts';
import type { TailgateError } from '../errors.ts';

/**
 * What the model would be sent now, with no side effects: nothing is claimed, consumed or
 * written. The prompt is the next turn's (without input), built by the turn's own steps
 * (`fitTurnPrompt`, lib/turn/turn-prompt.ts) from what the next turn's claim would start
 * from: the context start, the overflow boundary (the safety net drops as the turn would,
 * `context.overflow_dropped`), the notices. Notices appear where the `inbox` strategy would
 * put them, marked `pending: true`; the context counts them in `notices_pending`, not
 * `notices_delivered`. A compaction the turn would make is shown as made, its summary (which
 * only the model can write) an empty pending item, and `context.compaction.pending: true`.
 * When the next claim would take the oldest queued input up first (`on_busy: enqueue`, its own
 * request then refused as busy), the prompt is that input's turn's, named by `context.queued_turn`.
 * `refused`: what the next turn request would be refused with by the session's spent budget (its
 * claim's check, lib/ledger/budget.ts), else by its model offered more tools than it takes (the
 * claim's next, `refuseOverToolLimit`), as its answer has it; null when neither (a busy session's
 * 409 is not judged).
 */
export async function previewPrompt(
  services: TurnServices,
  sessionId: string,
  query: PreviewQuery,
): Promise<{
  items: PromptItem[];
  context: TurnContext & { notices_pending: string[]; queued_turn?: string };
  refused: { code: ErrorCode; message: string; details?: unknown } | null;
}> {
  const { built, context, read, pending, queued, stored, plan } = await buildPreview(services, sessionId, query, {});
  // The session's spent budget refuses the next turn request before its claim takes anything up, then its tools.
  const refused =
    budgetRefusal(stored.budget, stored.usage) ?? refusal(() => refuseOverToolLimit(plan.model, plan.tools, undefined));
  return {
    refused: refused && clientError(refused),
    items: built.hydrated,
    context: {
      ...context,
      notices_delivered: [],
      notices_pending: pending.map((notice) => notice.name),
      ...(queued ? { queued_turn: queued } : {}),
      ...(read.context && context.context_start_seq === undefined ? { context_start_seq: read.context.start_seq } : {}),
    },
  };
}

/**
 * The tokens of the prompt the next turn of a request with `truncation` set (an OpenAI-compatible
 * one's: it reads its history from the context start, the safety net unused) would build: its
 * `input` appended after the history as the turn stores it, its model, tools and instructions
 * (null: none) over the session's; counted before it is fitted to the window (a prompt past it,
 * which the turn refuses or truncates, is counted whole). When its claim would take a queued input
 * up first (as the preview shows that input's turn), 409 turn_in_progress naming that turn, as the
 * claim is then refused. `checkTools` checks the model and tools it offers first (its claim's
 * `checkConfig`). Of a fork not written (`ForkSketch`, SessionLog.sketchFork): its first turn's,
 * on the history up to the fork point, its inbox empty. Nothing is written.
 */
export async function countNextPrompt(
  services: TurnServices,
  sessionId: string | ForkSketch,
  next: { input: Item[]; model?: string | undefined; tools?: Tool[] | undefined; instructions?: string | null },
  checkTools?: (plan: TurnPlan) => void,
): Promise<number> {
  try {
    const { built, plan, budget } = await nextTurnPrompt(
      services,
      sessionId,
      next,
      { truncation: 'disabled' },
      checkTools,
    );
    return countPromptTokens(built.hydrated, plan.tools ?? [], budget.counter);
  } catch (error) {
    if (error instanceof ContextTooLargeError) return (error.details as { prompt_tokens: number }).prompt_tokens;
    throw error;
  }
}

/**
 * The prompt the next turn of `next` would send, built as {@link countNextPrompt} counts it, fitted
 * as `request` asks (its truncation, its reply's room): a `store: false` response off a stored one
 * (lib/openai/continued-stateless.ts) sends it. `withoutNotices`: the inbox's are left where they
 * wait (none shown, none taken). Nothing is written.
 */
export function nextTurnPrompt(
  services: TurnServices,
  sessionId: string | ForkSketch,
  next: NextRequest,
  request: PromptSource['request'] & Pick<TurnRequest, 'max_output_tokens'>,
  checkTools?: (plan: TurnPlan) => void,
): Promise<PreviewBuilt> {
  return buildPreview(services, sessionId, {}, request, next, checkTools);
}

type PreviewQuery = {
  strategies?: string | string[] | undefined;
  strategy_config?: Record<string, unknown> | undefined;
};

/** A turn's request: its input, and what it sets over the session. */
type NextRequest = {
  input: Item[];
  model?: string | undefined;
  tools?: Tool[] | undefined;
  instructions?: string | null;
  /** A queued input's, which its pickup claims (no new turn: no queued input goes first, as at its claim). */
  fromQueue?: boolean;
  /** Where its `strategy_config` was sent (a queued input's: its body, unless the query's replaces it). */
  sent?: 'body' | 'query';
  /** The inbox's notices are neither shown nor taken (a call that stores nothing). */
  withoutNotices?: true;
};

/**
 * The next turn's prompt as `request` would have it fitted (`next`: a request's turn), with what it
 * was built from; `checkTools` checks the tools its plan offers first, as a claim does before the
 * prompt is built (a prompt past the window is refused after it).
 */
async function buildPreview(
  services: TurnServices,
  sessionId: string | ForkSketch,
  query: PreviewQuery,
  request: PromptSource['request'] & Pick<TurnRequest, 'max_output_tokens'>,
  next?: NextRequest,
  checkTools?: (plan: TurnPlan) => void,
  tookNothing = askedOnce(services, sessionId),
): Promise<PreviewBuilt> {
  const stored = typeof sessionId === 'string' ? await services.sessions.get(sessionId) : sessionId.session;
  const session = next?.instructions === undefined ? stored : { ...stored, instructions: next.instructions };
  // The query's thresholds are named as the query's, a queued input's as its request's body.
  const plan = planTurn(services, session, { ...query, model: next?.model, tools: next?.tools }, next?.sent ?? 'query');
  checkTools?.(plan);
  // The reply's room as its request asks (a queued input's `max_output_tokens`), as the turn has it.
  const budget = promptBudget(
    plan.model,
    plan.strategyConfig,
    { maxOutputTokens: request.max_output_tokens },
    services.tokenEncoders,
  );
  const read = await services.sessions.previewContext(
    sessionId,
    (aggregates, context) =>
      context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates),
    safetyNetFits(plan, budget, request),
    undefined,
    tookNothing,
  );
  // Past a dead turn the next turn takes out first, its counts are those before that turn.
  const counts = read.counts ?? session.counts;
  const { created_at } = read;
  const input = (next?.input ?? []).map((item, index) => ({ ...item, seq: counts.items + 1 + index, created_at }));
  // The next claim takes the oldest queued input up first: its turn is the next, as it was queued,
  // and a request's own (a count's) is then refused as busy, as its claim is.
  if (read.queueFirst && !next?.fromQueue && typeof sessionId === 'string') {
    const queued = await oldestQueued(services, read.scope, read.openCalls);
    if (queued && next) throw new TurnInProgressError(sessionId, counts.turns + 1);
    if (queued) {
      const { input, request: queuedRequest, key_sha256: name } = queued;
      const asked = queuedRequest as Partial<TurnRequest>;
      const settings = {
        strategies: query.strategies ?? asked.strategies,
        strategy_config: query.strategy_config ?? asked.strategy_config,
      };
      const fitting = {
        ...(asked.truncation !== undefined ? { truncation: asked.truncation } : {}),
        ...(asked.max_output_tokens !== undefined ? { max_output_tokens: asked.max_output_tokens } : {}),
        ...(asked.compaction !== undefined ? { compaction: asked.compaction } : {}),
      };
      const sent = query.strategy_config === undefined ? ('body' as const) : ('query' as const);
      const nextTurn = { input, model: asked.model, tools: asked.tools, fromQueue: true, sent };
      const built = await buildPreview(services, sessionId, settings, fitting, nextTurn, undefined, tookNothing);
      return { ...built, queued: name };
    }
  }
  const inbox = plan.strategies.includes('inbox') && !next?.withoutNotices;
  // (A fork not written has no inbox yet: nothing waits in it, nor was taken from it.)
  const written = inbox && typeof sessionId === 'string' ? sessionId : undefined;
  // Those earlier turns took from the inbox but no model saw go first, as the turn delivers them
  // (lib/turn/notices.ts): a failed turn's, then those the turns closed by someone else took.
  const lost = read.undelivered.lost_turns;
  const recovered = written && lost.length > 0 ? await services.inbox.peekLost(written, lost) : [];
  const carried = [...read.undelivered.notices, ...recovered];
  // The notices the turn's consume takes as the session's own (lib/inbox/model-call.ts).
  const mark = { created_at: stored.created_at, incarnation: read.scope.incarnation };
  const waiting = written ? await services.inbox.peek(written, roomFor(services, carried.length), mark) : [];
  const pending = inbox ? [...carried, ...waiting] : [];
  const notices = pending.map((notice) => ({ content: notice.content, pending: true as const }));
  const { built, context } = await fitTurnPrompt(
    services,
    {
      turn: {
        scope: read.scope,
        session,
        turn: counts.turns + 1,
        input,
        ...(input.length === 0 && read.retaken ? { retaken: read.retaken } : {}),
        carried: read.carried,
        context: read.context,
        overflow: read.overflow,
      },
      plan,
      budget,
      request,
      history: [...read.items, ...input],
      aggregates: read.context ? undefined : read.aggregates,
      // The stored history from there on, then the input, which the turn has stored by then and the preview has not.
      readFrom: async (startSeq) => [
        ...(await services.sessions.previewContext(sessionId, () => CONTEXT_REQUIREMENT, false, startSeq, tookNothing))
          .items,
        ...input.filter((item) => item.seq >= startSeq),
      ],
      notices: { forPrompt: () => notices },
    },
    null,
  );
  return { built, context, read, pending, plan, budget, stored };
}

/** What `check` throws, else null. */
function refusal(check: () => void): TailgateError | null {
  try {
    check();
    return null;
  } catch (error) {
    return error as TailgateError;
  }
}

/**
 * Whether the turns closed by someone else took no notice (the inbox's `tookNothing`, which lists the
 * delivery records: a dead turn's take-out asks it), asked once for each question in a preview however
 * often it reads the session (a queued input's turn, a compaction's read again), as the turn's take-out
 * asks it once. None for a fork not written (no inbox yet).
 */
function askedOnce(services: TurnServices, sessionId: string | ForkSketch): RewindOptions['tookNothing'] {
  if (typeof sessionId !== 'string') return undefined;
  const answers = new Map<string, Promise<boolean>>();
  return (lost) => {
    const question = JSON.stringify(lost);
    const answer = answers.get(question) ?? services.inbox.tookNothing(sessionId, lost);
    answers.set(question, answer);
    return answer;
  };
}

type PreviewBuilt = Awaited<ReturnType<typeof fitTurnPrompt>> & {
  read: Awaited<ReturnType<TurnServices['sessions']['previewContext']>>;
  pending: Awaited<ReturnType<TurnServices['inbox']['peek']>>;
  plan: TurnPlan;
  budget: ReturnType<typeof promptBudget>;
  /** The session as read (of a fork not written: as it would be), its budget and totals. */
  stored: SessionRecord;
  /** The queued input whose turn it is (its `queued_turn`), when the next claim takes it up first. */
  queued?: string;
};

/**
 * The queued input a pickup would take up first (lib/turn/pickup.ts `pickUp`): the oldest still
 * there, withdrawn ones passed over, and those the pickup passes over (`passedOver`: taken up
 * already, or refused as invalid against the calls `openCalls` leaves open); null when none. Reads only.
 */
async function oldestQueued(
  services: TurnServices,
  scope: LogScope,
  openCalls: readonly string[] | null,
): Promise<QueuedInput | null> {
  for (const entry of await services.sessions.queued(scope)) {
    if (entry.withdrawn) continue;
    const found = await services.sessions.readQueued({ ...scope, generation: entry.generation }, entry.keyHash);
    if (found && !(await passedOver(services, scope, entry, found, openCalls))) return found;
  }
  return null;
}
