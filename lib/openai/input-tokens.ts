import { z } from 'zod';
import { countPromptTokens } from '../tokens/token-counter.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { responseInputItemSchema } from './input-schemas.ts';
import { partInRequest, prepareResponseRequest } from './request.ts';
import { responseCreateSchema } from './schemas.ts';
import { assembleStateless } from './stateless.ts';
import { checkInputCalls } from './stateless-response.ts';

/**
 * POST /v1/responses/input_tokens (`client.responses.inputTokens.count`): how many tokens the
 * prompt of a response to `input` would hold, by tailgate's own estimate: the counter that
 * sizes a model's window (`CONTEXT_LIMIT`, a budget's reserve), over the prompt the strategies
 * build from the instructions and the input, with the tools offered, as a `store: false`
 * response's prompt before it is fitted to the window, of an input such a response takes (its
 * checks refuse the same inputs). Nothing is read, called or stored.
 */

export const inputTokensSchema = responseCreateSchema
  .pick({
    model: true,
    instructions: true,
    tools: true,
    tool_choice: true,
    parallel_tool_calls: true,
    reasoning: true,
    text: true,
    truncation: true,
    previous_response_id: true,
    conversation: true,
  })
  .extend({
    input: z
      .union([z.string().min(1), z.array(responseInputItemSchema).min(1).max(10_000)])
      .nullable()
      .optional(),
  })
  .strict()
  .meta({ id: 'OpenAIInputTokenCount' });
export type InputTokensBody = z.infer<typeof inputTokensSchema>;

export function countInputTokens(
  facade: Facade,
  body: InputTokensBody,
): { object: 'response.input_tokens'; input_tokens: number } {
  // A stored conversation's prompt is its context as the next turn builds it: not estimated here.
  for (const field of ['previous_response_id', 'conversation'] as const) {
    if (body[field])
      throw new OpenAIApiError(
        400,
        'invalid_request',
        `input_tokens counts the input alone; ${field} is not supported (send the conversation's items as input)`,
        field,
      );
  }
  if (!body.input) throw new OpenAIApiError(400, 'invalid_request', 'give the input to count', 'input');
  const prepared = prepareResponseRequest(facade, { ...body, input: body.input, store: false });
  // An input a `store: false` create refuses (an output answering no call before it) is not counted.
  checkInputCalls(prepared);
  const tools = prepared.turnTools ?? [];
  const request = {
    items: prepared.items,
    instructions: prepared.instructions,
    tools,
    model: prepared.model ?? facade.config.defaultModel,
  };
  let stateless: ReturnType<typeof assembleStateless>;
  try {
    stateless = assembleStateless(facade.services, request);
  } catch (error) {
    // A refused image or file is named by its position in the request's input, as a create names it.
    throw partInRequest(error, prepared.positions.items) ?? error;
  }
  const { assembled, budget } = stateless;
  return { object: 'response.input_tokens', input_tokens: countPromptTokens(assembled.prompt, tools, budget.counter) };
}
