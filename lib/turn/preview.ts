import type { Item, PromptItem, Tool } from '../items.ts';
import { tailRequirement } from '../strategies/index.ts';
import type { TurnServices, TurnContext } from './types.ts';
import { planTurn, CONTEXT_REQUIREMENT } from './plan.ts';
import { promptBudget } from './model-call.ts';
import { fitTurnPrompt, safetyNetFits } from './turn-prompt.ts';
import { roomFor } from './notices.ts';
import { countPromptTokens } from '../tokens/token-counter.ts';

/**
 * What the model would be sent now, with no side effects: nothing is claimed, consumed or
 * written. The prompt is the next turn's (without input), built by the turn's own steps
 * (`fitTurnPrompt`, lib/turn/turn-prompt.ts) from what the next turn's claim would start
 * from: the context start, the overflow boundary (the safety net drops as the turn would,
 * `context.overflow_dropped`), the notices. Notices appear where the `inbox` strategy would
 * put them, marked `pending: true`; the context counts them in `notices_pending`, not
 * `notices_delivered`. A compaction the turn would make is shown as made, its summary (which
 * only the model can write) an empty pending item, and `context.compaction.pending: true`.
 * `next`: the turn of a request, its `input` appended after the history as the turn stores it,
 * its model, tools and instructions (null: none) over the session's; `tokens` counts its prompt.
 */
export async function previewPrompt(
  services: TurnServices,
  sessionId: string,
  query: { strategies?: string | string[]; strategy_config?: Record<string, unknown> },
  next?: { input: Item[]; model?: string | undefined; tools?: Tool[] | undefined; instructions?: string | null },
): Promise<{ items: PromptItem[]; context: TurnContext & { notices_pending: string[] }; tokens?: number }> {
  const stored = await services.sessions.get(sessionId);
  const session = next?.instructions === undefined ? stored : { ...stored, instructions: next.instructions };
  const plan = planTurn(services, session, { ...query, model: next?.model, tools: next?.tools });
  const created_at = new Date().toISOString();
  const input = (next?.input ?? []).map((item, index) => ({
    ...item,
    seq: session.counts.items + 1 + index,
    created_at,
  }));
  const budget = promptBudget(plan.model, plan.strategyConfig, {}, services.tokenEncoders);
  const read = await services.sessions.previewContext(
    sessionId,
    (aggregates, context) =>
      context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates),
    safetyNetFits(plan, budget, {}),
  );
  const inbox = plan.strategies.includes('inbox');
  // Those earlier turns took from the inbox but no model saw go first, as the turn delivers them.
  const carried = read.undelivered.notices;
  const pending = inbox
    ? [...carried, ...(await services.inbox.peek(sessionId, roomFor(services, carried.length)))]
    : [];
  const notices = pending.map((notice) => ({ content: notice.content, pending: true as const }));
  const { built, context } = await fitTurnPrompt(
    services,
    {
      turn: {
        scope: read.scope,
        session,
        turn: session.counts.turns + 1,
        input,
        carried: read.carried,
        context: read.context,
        overflow: read.overflow,
      },
      plan,
      budget,
      request: {},
      history: [...read.items, ...input],
      aggregates: read.context ? undefined : read.aggregates,
      readFrom: async (startSeq) =>
        (await services.sessions.previewContext(sessionId, () => CONTEXT_REQUIREMENT, false, startSeq)).items,
      notices: { forPrompt: () => notices },
    },
    null,
  );
  return {
    ...(next ? { tokens: countPromptTokens(built.hydrated, plan.tools ?? [], budget.counter) } : {}),
    items: built.hydrated,
    context: {
      ...context,
      notices_delivered: [],
      notices_pending: pending.map((notice) => notice.name),
      ...(read.context && context.context_start_seq === undefined ? { context_start_seq: read.context.start_seq } : {}),
    },
  };
}
