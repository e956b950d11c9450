import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { withRequestIdHeader } from './request-id.ts';
import type { AppEnv } from './router.ts';

const OPENAPI_INFO = {
  openapi: '3.0.3',
  info: {
    title: 'tailgate',
    version: '1.0.0',
    description: 'Stateless HTTP service for long-running LLM agent conversations.',
  },
  security: [{ bearer: [] }],
};

/**
 * The OpenAPI document of `app`'s routes, each response declaring x-request-id
 * (functions/request-id.ts): the one way the document is made, for Node's and Deno's requests and
 * for the copy `npm run assets` (scripts/assets.mjs) writes from the Worker's app for the Worker.
 */
export function generateOpenApiDocument(app: OpenAPIHono<AppEnv>): object {
  return withRequestIdHeader(app.getOpenAPIDocument(OPENAPI_INFO));
}

/**
 * The document GET /openapi.json and /docs publish, on Node and Deno generated from `app` on each
 * request. The Worker reads the copy made at build time from its static assets instead
 * (functions/openapi-asset.ts, wrangler.toml [alias]), so that its bundle does not carry the
 * generator.
 */
export function openApiDocument(_c: Context, app: OpenAPIHono<AppEnv>): Promise<object> {
  return Promise.resolve(generateOpenApiDocument(app));
}
