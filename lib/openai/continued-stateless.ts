import { refuseOverToolLimit } from '../models/model.ts';
import { checkAttachments } from '../session/attachments.ts';
import { outputRoom } from '../tokens/model-limits.ts';
import { countPromptTokens } from '../tokens/token-counter.ts';
import { nextTurnPrompt } from '../turn/index.ts';
import { buildModelRequest } from '../turn/model-call.ts';
import { sendsMedia } from '../turn/receipt.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { nextTurnOf } from './input-tokens.ts';
import { partInRequest, type PreparedRequest } from './request.ts';
import type { PreparedStateless, StatelessRequest } from './stateless.ts';

/**
 * A `store: false` response under previous_response_id or conversation, up to its model request:
 * the prompt is the one the stored create with the same body would send (its next turn's, where
 * that create would go on: after the conversation's newest turn, or the first turn of the branch
 * it would make at an older response, ./input-tokens.ts nextTurnOf), built by the turn's own
 * steps as the prompt preview builds it (lib/turn/preview.ts), the inbox's notices left waiting.
 * Nothing is written: no turn, item, receipt or branch, no notice taken, no compaction made (one
 * the turn would make first is a 409 `compaction_due`). The conversation's model, instructions and
 * tools unless the request sends its own, as that create. What refuses it throws here, before the
 * model call; the model call and its charge (the token's alone) are ./stateless.ts callStateless.
 */
export async function prepareContinued(
  facade: Facade,
  prepared: PreparedRequest,
  options: Omit<StatelessRequest, 'items' | 'instructions' | 'tools' | 'model'>,
): Promise<PreparedStateless> {
  const { services } = facade;
  const { sessionId, items, positions } = await nextTurnOf(facade, prepared, false);
  try {
    // The input's images and files as references, their bytes at hand (a turn stores them; this reads them).
    const input = checkAttachments(items, services.config);
    const next = {
      input: input.items,
      model: prepared.model,
      tools: prepared.turnTools,
      ...(prepared.sessionInstructions !== undefined ? { instructions: prepared.sessionInstructions } : {}),
      withoutNotices: true as const,
    };
    const fitting = { truncation: options.truncation ?? 'disabled', max_output_tokens: options.maxOutputTokens };
    const { built, context, plan, budget, read, stored } = await nextTurnPrompt(
      services,
      sessionId,
      next,
      fitting,
      (plan) => refuseOverToolLimit(plan.model, plan.tools, prepared.modelSettings),
    );
    if (context.compaction?.pending)
      throw new OpenAIApiError(
        409,
        'compaction_due',
        'the conversation is due a compaction, which only a stored response makes: ' +
          'send it with store true, or compact it first (client.responses.compact)',
        'store',
      );
    await services.tokenSpend?.checkNow();
    const { hydrated, cacheBreakpoint } = built;
    const prompt = await services.sessions.readMedia(
      read.scope,
      hydrated,
      sendsMedia(plan.model, hydrated),
      input.bytesOf,
    );
    const tokens = () => context.prompt_tokens ?? countPromptTokens(hydrated, plan.tools, budget.counter);
    const room = outputRoom(budget.contextLimit, tokens);
    return {
      model: plan.model,
      modelRequest: buildModelRequest(prompt, plan.tools, cacheBreakpoint, options, room),
      context: { ...context, notices_delivered: [] },
      counter: budget.counter,
      ran: {
        instructions: prepared.sessionInstructions === undefined ? stored.instructions : prepared.sessionInstructions,
        tools: prepared.tools ?? stored.tools,
      },
    };
  } catch (error) {
    // A refusal naming an input item names it by its position in the request's input.
    throw partInRequest(error, positions) ?? error;
  }
}
