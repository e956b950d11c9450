import { createRoute } from '@hono/zod-openapi';
import { authorizeSession } from '../auth.ts';
import { createRouter } from '../router.ts';
import { grants, requires } from '../tokens.ts';
import { errorResponses, jsonBody, jsonResponse } from '../openapi-helpers.ts';
import {
  sessionCreateSchema,
  sessionForkSchema,
  sessionIdParamsSchema,
  sessionPatchSchema,
  sessionSchema,
  turnParamsSchema,
} from '../schemas.ts';
import { normalizeSessionFields, toolLimitCheck } from '../session-fields.ts';
import { deleteNewestTurn, forkSession } from '../../lib/turn/fork.ts';
import { afterResponse } from '../../lib/turn/after-response.ts';
import { pickUp } from '../../lib/turn/index.ts';

const createSessionRoute = createRoute({
  method: 'post',
  path: '/v1/sessions',
  tags: ['sessions'],
  summary: 'Create a session',
  security: requires('admin'),
  request: { body: jsonBody(sessionCreateSchema) },
  responses: { 201: jsonResponse(sessionSchema, 'The new session'), ...errorResponses(400, 401, 403, 409, 413, 503) },
});

/**
 * The size limits a client (the inspector's chat box) checks before it sends a turn, on the
 * session it reads: the request body's and a decoded image's.
 */
const MAX_BODY_HEADER = 'Tailgate-Max-Body-Bytes';
const MAX_IMAGE_HEADER = 'Tailgate-Max-Image-Bytes';

const getSessionRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}',
  tags: ['sessions'],
  summary: 'Read a session with its counts',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema },
  responses: {
    200: {
      ...jsonResponse(sessionSchema, 'The session'),
      headers: {
        [MAX_BODY_HEADER]: {
          description: 'The largest request body taken (MAX_BODY_BYTES)',
          schema: { type: 'integer' },
        },
        [MAX_IMAGE_HEADER]: {
          description: 'The largest decoded `input_image` payload taken (MAX_IMAGE_BYTES)',
          schema: { type: 'integer' },
        },
      },
    },
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const patchSessionRoute = createRoute({
  method: 'patch',
  path: '/v1/sessions/{id}',
  tags: ['sessions'],
  summary: 'Change config fields of a session',
  security: requires('admin'),
  request: { params: sessionIdParamsSchema, body: jsonBody(sessionPatchSchema) },
  responses: {
    200: jsonResponse(sessionSchema, 'The updated session'),
    ...errorResponses(400, 401, 403, 404, 413, 503),
  },
});

const deleteSessionRoute = createRoute({
  method: 'delete',
  path: '/v1/sessions/{id}',
  tags: ['sessions'],
  summary: 'Delete everything stored for a session',
  security: requires('admin'),
  request: { params: sessionIdParamsSchema },
  responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 401, 403, 404, 503) },
});

const forkSessionRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/fork',
  tags: ['sessions'],
  summary: "Fork a session at a turn or seq: a new session sharing the parent's history, copying none of it",
  security: requires('admin'),
  request: { params: sessionIdParamsSchema, body: jsonBody(sessionForkSchema) },
  responses: {
    201: jsonResponse(sessionSchema, 'The fork'),
    ...errorResponses(400, 401, 403, 404, 409, 413, 503),
  },
});

const deleteTurnRoute = createRoute({
  method: 'delete',
  path: '/v1/sessions/{id}/turns/{turn}',
  tags: ['turns'],
  summary: 'Delete the newest turn: the session goes back to the record before it, a fork of itself there',
  security: requires('admin'),
  request: { params: turnParamsSchema },
  responses: {
    200: jsonResponse(sessionSchema, 'The session as it is now'),
    ...errorResponses(400, 401, 403, 404, 409, 503),
  },
});

/** POST/GET/PATCH/DELETE /v1/sessions[/:id], POST /v1/sessions/:id/fork, DELETE .../turns/:turn. */
export function sessionRoutes() {
  return createRouter()
    .openapi(createSessionRoute, async (c) => {
      const body = c.req.valid('json');
      const { sessions } = c.var.services;
      const fields = normalizeSessionFields(body, c.var.services);
      toolLimitCheck(c.var.services, body)(body);
      const session = await sessions.create({
        ...fields,
        ...(body.id !== undefined ? { id: body.id } : {}),
      });
      return c.json(session, 201);
    })
    .openapi(forkSessionRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { at_turn, at_seq, id: forkId, ...fields } = c.req.valid('json');
      // The fork is a session of its own, outside the one a bound token may act on (403).
      authorizeSession(c, null);
      const session = await forkSession(c.var.services, id, {
        ...(at_turn !== undefined ? { at_turn } : {}),
        ...(at_seq !== undefined ? { at_seq } : {}),
        fields: { ...normalizeSessionFields(fields, c.var.services), ...(forkId !== undefined ? { id: forkId } : {}) },
        check: toolLimitCheck(c.var.services, fields),
      });
      return c.json(session, 201);
    })
    .openapi(getSessionRoute, async (c) => {
      const { id } = c.req.valid('param');
      const session = await c.var.services.sessions.get(id);
      c.header(MAX_BODY_HEADER, String(c.var.config.maxBodyBytes));
      c.header(MAX_IMAGE_HEADER, String(c.var.config.maxImageBytes));
      if (grants(c.var.principal.scopes, 'admin')) return c.json(session, 200);
      // Only an admin token sets it, and a receiver's URL often holds its secret (a capability URL).
      const { webhook_url: _, ...shown } = session;
      return c.json(shown, 200);
    })
    .openapi(patchSessionRoute, async (c) => {
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      const { services } = c.var;
      // A raised budget lets queued inputs that waited for it run: the session is marked for the
      // sweep of queues first (the sweep unmarks a queue its spent budget holds), so they run
      // though this process dies before its pickup. Marked again once the budget is stored: a
      // sweep that deleted the first mark may have looked at the budget before it was stored.
      const queued = body.budget !== undefined && (await services.sessions.markQueueIfQueued(id));
      const fields = normalizeSessionFields(body, services);
      const updated = await services.sessions.update(id, fields, toolLimitCheck(services, body));
      if (queued) await services.sessions.markQueueIfQueued(id);
      if (body.budget !== undefined) afterResponse(services, () => pickUp(services, id));
      return c.json(updated, 200);
    })
    .openapi(deleteTurnRoute, async (c) => {
      const { id, turn } = c.req.valid('param');
      return c.json(await deleteNewestTurn(c.var.services, id, turn), 200);
    })
    .openapi(deleteSessionRoute, async (c) => {
      const { id } = c.req.valid('param');
      await c.var.services.sessions.delete(id);
      return c.body(null, 204);
    });
}
