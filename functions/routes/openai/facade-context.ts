import type { Context } from 'hono';
import type { Facade } from '../../../lib/openai/facade.ts';
import { openaiErrorSchema } from '../../../lib/openai/schemas.ts';
import { authorizeSession } from '../../auth.ts';
import { checkItemSizes } from '../../../lib/session/item-size.ts';
import type { AppEnv } from '../../router.ts';
import { openaiErrorBody } from './errors.ts';

/** What lib/openai/ works with for one request: its services and config, and its caller's access. */
export function facadeOf(c: Context<AppEnv>): Facade {
  return {
    services: c.var.services,
    config: c.var.config,
    caller: c.var.principal.budget?.id ?? '',
    authorize: (sessionId, header) => authorizeSession(c, sessionId, header),
    checkItems: (items, name, positions) => checkItemSizes(items, c.var.config.maxItemBytes, { name, positions }),
    errorBody: (error) => openaiErrorBody(error, c.var.services.log).body,
    takeSessionTurn: c.var.takeSessionTurn,
    signal: c.req.raw.signal,
  };
}

/** The error answers of a route of the OpenAI-compatible API, for /openapi.json. */
export function openaiErrors(...statuses: number[]) {
  return Object.fromEntries(
    statuses.map((status) => [
      status,
      { description: "An error in OpenAI's shape", content: { 'application/json': { schema: openaiErrorSchema } } },
    ]),
  );
}
