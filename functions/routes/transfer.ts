import { createRoute, z } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { InvalidRequestError } from '../../lib/errors.ts';
import {
  exportCompactionSchema,
  exportHeaderSchema,
  exportItemSchema,
  exportNoticeSchema,
} from '../../lib/session/export-format.ts';
import { exportLines, importLines } from '../../lib/transfer.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import { checkJsonValue } from '../request-json.ts';
import { createRouter } from '../router.ts';
import { sessionIdParamsSchema, sessionSchema } from '../schemas.ts';
import { normalizeSessionFields, toolLimitCheck } from '../session-fields.ts';
import { requires } from '../tokens.ts';

/** The content type of an export, and of an import's body (JSON Lines). */
const NDJSON = 'application/x-ndjson';
const NDJSON_CONTENT_TYPE = /^application\/(x-ndjson|jsonl|x-jsonlines)\s*(;|$)/i;

const exportLinesSchema = z
  .union([exportHeaderSchema, exportItemSchema, exportCompactionSchema, exportNoticeSchema])
  .meta({
    description:
      'One JSON value per line: the header (type "session"), every item oldest first, the compaction, ' +
      'then the delivered notices.',
  });

const exportRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/export',
  tags: ['sessions'],
  summary: 'Export a session as JSON Lines (streamed)',
  security: requires('session:read'),
  request: { params: sessionIdParamsSchema },
  responses: {
    200: { description: 'The export, one line at a time', content: { [NDJSON]: { schema: exportLinesSchema } } },
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

const importRoute = createRoute({
  method: 'post',
  path: '/v1/sessions/import',
  tags: ['sessions'],
  summary: 'Create a session from an export (streamed JSON Lines body)',
  security: requires('admin'),
  request: { body: { required: true, content: { [NDJSON]: { schema: exportLinesSchema } } } },
  responses: {
    201: jsonResponse(sessionSchema, 'The imported session'),
    ...errorResponses(400, 401, 403, 409, 413, 503),
  },
});

/** The import's body is streamed: the body limit and the JSON body checks of functions/app.ts pass it by. */
export function isStreamedImport(c: Context): boolean {
  return c.req.method === 'POST' && c.req.path === '/v1/sessions/import';
}

/** GET /v1/sessions/:id/export and POST /v1/sessions/import. */
export function transferRoutes() {
  return createRouter()
    .openapi(exportRoute, async (c) => {
      const { id } = c.req.valid('param');
      const lines = await exportLines(c.var.services, id);
      const encoder = new TextEncoder();
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await lines.next();
          if (next.done) controller.close();
          else controller.enqueue(encoder.encode(next.value));
        },
        async cancel() {
          await lines.return(undefined);
        },
      });
      // The route types take a content type naming "json" for c.json's; this one is a stream of lines.
      return new Response(body, { status: 200, headers: { 'content-type': NDJSON } }) as never;
    })
    .openapi(importRoute, async (c) => {
      const body = readBody(c.req.raw.body);
      try {
        if (!NDJSON_CONTENT_TYPE.test(c.req.header('content-type') ?? ''))
          throw new InvalidRequestError(`an import is JSON Lines: send Content-Type: ${NDJSON}`, {
            field: 'content-type',
          });
        const { config, services } = c.var;
        const session = await importLines(services, body.chunks, {
          maxItemBytes: config.maxItemBytes,
          maxNoticeBytes: config.maxNoticeBytes,
          maxLineBytes: importLineBytes(config.maxBodyBytes),
          checkValue: checkJsonValue,
          checkHeader: (header) => {
            const fields = normalizeSessionFields(header, services);
            toolLimitCheck(services, header)(header);
            return { ...header, ...fields } as typeof header;
          },
        });
        return c.json(session, 201);
      } catch (error) {
        // Refused before its body was read to its end (a taken id, a bad line): the rest stays
        // unread, so the connection closes after the answer, which says so, as a body refused
        // unread does (functions/body-budget.ts): a keep-alive client then sends its next
        // request on a new connection, not on one the server ends under it.
        if (!body.ended()) c.header('Connection', 'close');
        throw error;
      }
    });
}

/**
 * The longest line an import takes: an export may write an item longer than the body that sent
 * it (its `seq` and `created_at`, a message's `type`; each image's media type and base64 padding,
 * at most 12 bytes more than the 55 its part takes at least; each text part of a chat message as
 * `input_text`, 6 bytes more than its 26), so a line may exceed `MAX_BODY_BYTES` by a quarter and
 * 1 KiB, and whatever was accepted exports to lines an import takes (docs/API.md, "Export and import").
 */
function importLineBytes(maxBodyBytes: number): number {
  return maxBodyBytes + Math.ceil(maxBodyBytes / 4) + 1024;
}

/** The chunks of a request body, read as they arrive, and whether they were read to its end. */
function readBody(body: ReadableStream<Uint8Array> | null): {
  chunks: AsyncGenerator<Uint8Array>;
  ended: () => boolean;
} {
  let ended = !body;
  async function* chunks(): AsyncGenerator<Uint8Array> {
    if (!body) return;
    const reader = body.getReader();
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) yield next.value;
      ended = true;
    } finally {
      reader.releaseLock();
    }
  }
  return { chunks: chunks(), ended: () => ended };
}
