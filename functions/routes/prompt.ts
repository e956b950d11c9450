import { createRoute } from '@hono/zod-openapi';
import { withoutData } from '../../lib/content.ts';
import { InvalidRequestError } from '../../lib/errors.ts';
import { parseStrategyConfigLayer } from '../../lib/strategies/strategy-config.ts';
import { sha256Hex } from '../../lib/hash.ts';
import type { PromptItem } from '../../lib/items.ts';
import { utf8Bytes } from '../../lib/session/item-size.ts';
import { previewPrompt } from '../../lib/turn/index.ts';
import { STATUS_BY_CODE } from '../error-handler.ts';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { checkJsonValue } from '../request-json.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import { promptPreviewSchema, promptQuerySchema, sessionIdParamsSchema } from '../schemas.ts';

const previewRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/prompt',
  tags: ['prompt'],
  summary:
    'What the model would be sent now (no side effects; pending notices marked; payloads over 4 KiB elided unless ' +
    'full=true)',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema, query: promptQuerySchema },
  responses: {
    200: jsonResponse(promptPreviewSchema, 'The prompt and its context'),
    ...errorResponses(400, 401, 403, 404, 413, 503),
  },
});

/** GET /v1/sessions/:id/prompt. */
export function promptRoutes() {
  return createRouter().openapi(previewRoute, async (c) => {
    const { id } = c.req.valid('param');
    const query = c.req.valid('query');
    // It calls no model: a token whose budget caps its cost previews an unpriced model's prompt.
    const services = c.var.services;
    const preview = await previewPrompt({ ...services, model: services.previewModel }, id, {
      ...(query.strategies !== undefined ? { strategies: query.strategies } : {}),
      ...(query.strategy_config !== undefined ? { strategy_config: parseConfigQuery(query.strategy_config) } : {}),
    });
    // What the next turn request would be refused with, as its answer has it (functions/error-handler.ts).
    // Last, after the prompt and its context, which readers of the answer look at first.
    const { refused, ...prompt } = preview;
    const shown = { ...prompt, refused: refused && { status: STATUS_BY_CODE[refused.code], ...refused } };
    return c.json(query.full === 'true' ? shown : { ...shown, items: preview.items.map(elideLargePayload) }, 200);
  });
}

function parseConfigQuery(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new InvalidRequestError('query.strategy_config: not valid JSON', { field: 'strategy_config' });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidRequestError('query.strategy_config: must be a JSON object', { field: 'strategy_config' });
  }
  checkJsonValue(value, 'query.strategy_config');
  // Its thresholds are checked here, so that a refusal names the query, not the body.
  parseStrategyConfigLayer(value, 'request', 'query');
  return value as Record<string, unknown>;
}

/** Payloads above this many UTF-8 bytes are elided from a preview without `full=true`. */
export const PREVIEW_ELIDE_BYTES = 4096;

/**
 * A preview item with its payload (a message's `content`, a call's `arguments`, an output's
 * `output`) emptied when it is larger than PREVIEW_ELIDE_BYTES, and `elided: {bytes,
 * sha256}` saying what was there. The model gets it whole; only the preview leaves it out.
 */
function elideLargePayload(item: PromptItem): PromptItem & { elided?: { bytes: number; sha256: string } } {
  const [field, text] =
    item.type === 'message'
      ? ['content', item.content]
      : item.type === 'function_call'
        ? ['arguments', item.arguments]
        : ['output', item.output];
  if (typeof text !== 'string') return { ...item, [field]: withoutData(text) } as PromptItem;
  // UTF-8 takes at most 3 bytes per UTF-16 unit: a short text needs no counting.
  if (text.length * 3 <= PREVIEW_ELIDE_BYTES) return item;
  const bytes = utf8Bytes(text);
  if (bytes <= PREVIEW_ELIDE_BYTES) return item;
  return { ...item, [field]: '', elided: { bytes, sha256: sha256Hex(text) } };
}
