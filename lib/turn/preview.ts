import type { PromptItem } from '../items.ts';
import { tailRequirement } from '../strategies/index.ts';
import type { TurnServices, TurnContext } from './types.ts';
import { planTurn, CONTEXT_REQUIREMENT } from './plan.ts';
import { assemblePrompt, promptContext } from './assemble-prompt.ts';

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
  const {
    items: history,
    aggregates,
    context: contextStart,
    scope,
  } = await services.sessions.previewContext(sessionId, (aggregates, context) =>
    context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates),
  );
  const pending = plan.strategies.includes('inbox') ? await services.inbox.peek(sessionId) : [];
  const { prompt, prepared } = assemblePrompt({
    history,
    contextStart,
    strategies: plan.strategies,
    strategyConfig: plan.strategyConfig,
    env: services.env,
    aggregates: contextStart ? undefined : aggregates,
    notices: pending.map((notice) => ({ content: notice.content, pending: true as const })),
    instructions: session.instructions,
  });
  const items = await services.sessions.hydrate(scope, prompt);
  return {
    items,
    context: {
      ...promptContext(prepared, items),
      notices_delivered: [],
      notices_pending: pending.map((notice) => notice.name),
      ...(contextStart ? { context_start_seq: contextStart.start_seq } : {}),
    },
  };
}
