import { createRoute, z } from '@hono/zod-openapi';
import { NotFoundError } from '../../lib/errors.ts';
import { FILE_MEDIA_TYPES, IMAGE_MEDIA_TYPES, sniffMediaType } from '../../lib/media.ts';
import { createRouter } from '../router.ts';
import { errorResponses } from '../openapi-helpers.ts';
import { sessionIdParamsSchema } from '../schemas.ts';
import { requires } from '../tokens.ts';

const blobParamsSchema = sessionIdParamsSchema.extend({
  sha256: z
    .string()
    .regex(/^[0-9a-f]{64}$/, 'must be a SHA-256 in lowercase hex')
    .meta({
      param: { name: 'sha256', in: 'path' },
      example: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    }),
});

const binarySchema = z.string().meta({ format: 'binary' });

const getBlobRoute = createRoute({
  method: 'get',
  path: '/v1/sessions/{id}/blobs/{sha256}',
  tags: ['items'],
  summary: "One of the session's blobs: an image or file an item references (`blob`), or a large output",
  security: requires('session:read'),
  request: { params: blobParamsSchema },
  responses: {
    200: {
      description:
        'The bytes, with the media type read from them (image/png, image/jpeg, image/gif, image/webp, ' +
        'application/pdf), else text/plain for an output stored out of line',
      content: Object.fromEntries(
        [...IMAGE_MEDIA_TYPES, ...FILE_MEDIA_TYPES, 'text/plain'].map((type) => [type, { schema: binarySchema }]),
      ),
    },
    ...errorResponses(400, 401, 403, 404, 503),
  },
});

/** GET /v1/sessions/:id/blobs/:sha256. */
export function blobRoutes() {
  return createRouter().openapi(getBlobRoute, async (c) => {
    const { id, sha256 } = c.req.valid('param');
    const bytes = await c.var.services.sessions.readBlob(id, sha256);
    if (!bytes) throw new NotFoundError(`session ${id} has no blob ${sha256}`, { id, sha256 });
    const type = sniffMediaType(bytes) ?? 'text/plain; charset=utf-8';
    const headers = {
      'content-type': type,
      'cache-control': 'private, max-age=31536000, immutable',
      // Bytes a client chose (an output's text, a PDF): a browser opening them guesses no other type and runs nothing.
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'none'; sandbox",
    };
    return new Response(bytes as Uint8Array<ArrayBuffer>, { status: 200, headers }) as never;
  });
}
