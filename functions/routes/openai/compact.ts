import { createRoute } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { compactSession } from '../../../lib/turn/compact-session.ts';
import { compactedResponse, compactionItem, compactItems } from '../../../lib/openai/compaction.ts';
import { compactionId, randomId } from '../../../lib/openai/ids.ts';
import { inputToItems } from '../../../lib/openai/responses.ts';
import { appendItems } from '../../../lib/turn.ts';
import { authorizeSession } from '../../auth.ts';
import { checkItemSizes } from '../../item-size.ts';
import { jsonBody } from '../../openapi-helpers.ts';
import { createRouter, type AppEnv } from '../../router.ts';
import { requires } from '../../tokens.ts';
import { OpenAIApiError } from '../../../lib/openai/errors.ts';
import { modelOf } from '../../../lib/openai/facade.ts';
import { continuedSession } from '../../../lib/openai/sessions.ts';
import { facadeOf, openaiErrors } from './facade-context.ts';
import {
  openaiObject,
  openaiObjectSchema,
  responseCompactSchema,
  type ResponseCompactBody,
} from '../../../lib/openai/schemas.ts';

/**
 * POST /v1/responses/compact (`client.responses.compact`): with `previous_response_id`, the
 * conversation's session is compacted as POST /v1/sessions/:id/compact does (everything
 * summarized, `input` appended first), and the session's context starts at the summary from
 * then on; with only `input`, the input is summarized and nothing is stored. The output is one
 * compaction item whose `encrypted_content` is the summary as plain text.
 */

const compactResponseRoute = createRoute({
  method: 'post',
  path: '/v1/responses/compact',
  tags: ['openai'],
  summary: "Compact a conversation (OpenAI's responses.compact): summarize it and start its context at the summary",
  description:
    'Needs session:turn. With previous_response_id the session is compacted (a token bound to it may); ' +
    'with input alone nothing is stored (a token bound to no session).',
  security: requires('session:turn'),
  request: { body: jsonBody(responseCompactSchema) },
  responses: {
    200: {
      description: 'The compacted response (object `response.compaction`)',
      content: { 'application/json': { schema: openaiObjectSchema } },
    },
    ...openaiErrors(400, 401, 403, 404, 409, 413, 502, 503, 504),
  },
});

async function compactStored(
  c: Context<AppEnv>,
  body: ResponseCompactBody,
  previousResponseId: string,
  model: string | undefined,
): Promise<ResponseCompactionItem[]> {
  const services = c.var.services;
  const sessionId = await continuedSession(facadeOf(c), previousResponseId);
  if (body.input) {
    const items = inputToItems(body.input).items;
    checkItemSizes(items, c.var.config.maxItemBytes);
    if (items.length > 0) await appendItems(services, sessionId, items);
  }
  const result = await compactSession(services, sessionId, { keep_tokens: 0, ...(model ? { model } : {}) });
  return result.context
    ? [compactionItem(compactionId(sessionId, result.context.start_seq), result.context.summary)]
    : [];
}

async function compactInline(
  c: Context<AppEnv>,
  body: ResponseCompactBody,
  model: string | undefined,
): Promise<ResponseCompactionItem[]> {
  const services = c.var.services;
  authorizeSession(c, null);
  if (!body.input)
    throw new OpenAIApiError(400, 'invalid_request', 'give input or previous_response_id to compact', 'input');
  const items = inputToItems(body.input).items;
  checkItemSizes(items, c.var.config.maxItemBytes);
  const modelId = model ?? c.var.config.defaultModel;
  const summary = await compactItems({
    items,
    modelId,
    summaryModel: services.model(model ?? c.var.config.summaryModel ?? modelId),
    env: services.env,
    ...(c.var.config.summaryPrompt ? { summaryPrompt: c.var.config.summaryPrompt } : {}),
    ...(services.tokenEncoders ? { tokenEncoders: services.tokenEncoders } : {}),
  });
  return summary === null ? [] : [compactionItem(randomId('cmp'), summary)];
}

/** POST /v1/responses/compact. */
export function compactResponseRoutes() {
  return createRouter().openapi(compactResponseRoute, async (c) => {
    const body = c.req.valid('json');
    const model = body.model ? modelOf(facadeOf(c), body.model) : undefined;
    const output = body.previous_response_id
      ? await compactStored(c, body, body.previous_response_id, model)
      : await compactInline(c, body, model);
    return c.json(openaiObject(compactedResponse(randomId('resp'), new Date(), output)), 200);
  });
}
