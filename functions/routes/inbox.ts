import { createRoute } from '@hono/zod-openapi';
import { createRouter } from '../router.ts';
import { requires } from '../tokens.ts';
import { errorResponses, jsonBody, jsonResponse } from '../openapi-helpers.ts';
import {
  deliveredListSchema,
  inboxPageQuerySchema,
  noticeCreateSchema,
  noticeParamsSchema,
  noticePostedSchema,
  pendingListSchema,
  sessionIdParamsSchema,
  unreadableListSchema,
} from '../schemas.ts';

const postNoticeRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/{id}/inbox',
  tags: ['inbox'],
  summary:
    'Post a one-shot notice for the next turn (the name `abort` aborts it); 409 inbox_full when ' +
    '`MAX_PENDING_NOTICES` are pending',
  security: requires('inbox:write'),
  request: { params: sessionIdParamsSchema, body: jsonBody(noticeCreateSchema) },
  responses: {
    201: jsonResponse(noticePostedSchema, 'The notice is pending'),
    ...errorResponses(400, 401, 403, 404, 409, 413, 503),
  },
});

const listPendingRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/inbox',
  tags: ['inbox'],
  summary: 'A page of pending notices, sorted by name',
  security: requires('inbox:read'),
  request: { params: sessionIdParamsSchema, query: inboxPageQuerySchema },
  responses: { 200: jsonResponse(pendingListSchema, 'Pending notices'), ...errorResponses(400, 401, 403, 404, 503) },
});

const listDeliveredRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/inbox/delivered',
  tags: ['inbox'],
  summary: 'A page of delivered notices, sorted by stored_as',
  security: requires('inbox:read'),
  request: { params: sessionIdParamsSchema, query: inboxPageQuerySchema },
  responses: {
    200: jsonResponse(deliveredListSchema, 'Delivered notices'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const listUnreadableRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/inbox/unreadable',
  tags: ['inbox'],
  summary: 'A page of the notices set aside as unreadable (never delivered), sorted by stored_as',
  security: requires('inbox:read'),
  request: { params: sessionIdParamsSchema, query: inboxPageQuerySchema },
  responses: {
    200: jsonResponse(unreadableListSchema, 'Notices set aside as unreadable'),
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const withdrawRoute = createRoute({
  method: 'delete',
  path: '/v1/sessions/{id}/inbox/{name}',
  tags: ['inbox'],
  summary: 'Withdraw a pending notice',
  security: requires('inbox:write'),
  request: { params: noticeParamsSchema },
  responses: { 204: { description: 'Withdrawn' }, ...errorResponses(400, 401, 403, 404, 503) },
});

/** The inbox routes (docs/API.md, "Inbox"). `delivered` and `unreadable` are registered before `{name}`. */
export function inboxRoutes() {
  return createRouter()
    .openapi(postNoticeRoute, async (c) => {
      const { id } = c.req.valid('param');
      const body = c.req.valid('json');
      return c.json(await c.var.services.inbox.post(id, body), 201);
    })
    .openapi(listPendingRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json(await c.var.services.inbox.pendingPage(id, c.req.valid('query')), 200);
    })
    .openapi(listDeliveredRoute, async (c) => {
      const { id } = c.req.valid('param');
      const { inbox, sessions } = c.var.services;
      // The records of turns closed by someone else, which no receipt names, are listed under no turn.
      return c.json(await inbox.deliveredPage(id, c.req.valid('query'), () => sessions.lostTurns(id)), 200);
    })
    .openapi(listUnreadableRoute, async (c) => {
      const { id } = c.req.valid('param');
      return c.json(await c.var.services.inbox.unreadablePage(id, c.req.valid('query')), 200);
    })
    .openapi(withdrawRoute, async (c) => {
      const { id, name } = c.req.valid('param');
      await c.var.services.inbox.withdraw(id, name);
      return c.body(null, 204);
    });
}
