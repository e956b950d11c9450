import { createRoute } from '@hono/zod-openapi';
import { countInputTokens, inputTokensSchema } from '../../../lib/openai/input-tokens.ts';
import { openaiObject, openaiObjectSchema } from '../../../lib/openai/schemas.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';

/** POST /v1/responses/input_tokens (lib/openai/input-tokens.ts does the work). */

const inputTokensRoute = createRoute({
  method: 'post',
  path: '/v1/responses/input_tokens',
  tags: ['openai'],
  summary: "Count a response's input tokens (OpenAI's responses.inputTokens.count), by tailgate's estimate",
  description:
    'Needs session:turn. The tokens of the prompt the strategies build from `instructions`, `input` and ' +
    "`tools`, by the counter that sizes the model's window. With `previous_response_id` or `conversation`: " +
    "the prompt the conversation's next turn would send, its stored context and the input (it reads the " +
    'conversation); with a `previous_response_id` older than its newest, the prompt of the branch a create ' +
    'would make, which is not made. Calls no model (a provider without its key configured counts too) and ' +
    'stores nothing.',
  security: requires('session:turn'),
  request: { body: jsonBody(inputTokensSchema) },
  responses: {
    200: {
      description: 'The count (object `response.input_tokens`)',
      content: { 'application/json': { schema: openaiObjectSchema } },
    },
    ...openaiErrors(400, 401, 403, 404, 409, 413),
  },
});

/** POST /v1/responses/input_tokens. */
export function inputTokensRoutes() {
  return createRouter().openapi(inputTokensRoute, async (c) => {
    // A count calls no model: a budgeted token counts a model without a price too, as it previews.
    const facade = facadeOf(c);
    const services = { ...facade.services, model: c.var.services.previewModel };
    return c.json(openaiObject(await countInputTokens({ ...facade, services }, c.req.valid('json'))), 200);
  });
}
