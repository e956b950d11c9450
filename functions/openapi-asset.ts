import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { AppEnv } from './router.ts';

/**
 * Where `npm run assets` (scripts/assets.mjs) writes the Worker's OpenAPI document under .assets/.
 * The path is in wrangler.toml's `run_worker_first`, so the platform never serves it itself: the
 * Worker has no route there, and answers it as any path it does not serve.
 */
export const OPENAPI_ASSET_PATH = '/openapi/worker.json';

/** The document as read: a deployment's static assets do not change under its isolates. */
let read: string | undefined;

/**
 * The Worker's `openApiDocument` (wrangler.toml [alias] puts this module in place of
 * functions/openapi-document.ts): the document `npm run assets` generated from the Worker's app,
 * read through the ASSETS binding (wrangler.toml [assets]) once an isolate, and parsed for each
 * request as a generated one would be made. GET /openapi.json and /docs keep their routes' auth
 * and headers. Throws (a 500) when the deployment has no such asset.
 */
export async function openApiDocument(c: Context, _app: OpenAPIHono<AppEnv>): Promise<object> {
  if (read === undefined) {
    const assets = (c.env as { ASSETS?: Fetcher } | undefined)?.ASSETS;
    const response = await assets?.fetch(new URL(OPENAPI_ASSET_PATH, c.req.url));
    if (!response?.ok)
      throw new Error(
        `.assets${OPENAPI_ASSET_PATH} is not in the Worker's static assets (ASSETS, wrangler.toml [assets]): ` +
          'run `npm run assets` before deploying',
      );
    read = await response.text();
  }
  return JSON.parse(read) as object;
}
