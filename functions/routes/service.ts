import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { parseServiceConfig } from '../../lib/config.ts';
import { createRouter, type AppEnv, type RuntimeEnvironment } from '../router.ts';
import { docsPage, DOCS_SCRIPT_PATH } from '../docs-page.ts';
import { healthSchema } from '../schemas.ts';
import { errorResponses, jsonResponse } from '../openapi-helpers.ts';
import { openApiDocument } from '../openapi-document.ts';

const healthRoute = createRoute({
  method: 'get',
  path: '/healthz',
  tags: ['service'],
  summary: 'Health check (no auth): up, with settings that parse',
  security: [],
  responses: {
    200: jsonResponse(healthSchema, 'The service is up and its settings parse'),
    ...errorResponses(503),
  },
});

export interface ServiceRouteOptions {
  /** The app whose OpenAPI document /openapi.json and /docs publish. */
  app: OpenAPIHono<AppEnv>;
  readEnvironment: (c: Context) => RuntimeEnvironment;
  /**
   * Throws what every other request would answer for the deployment's settings: a setting
   * that does not parse, or a store they cannot make (503 not_configured). Touches no storage.
   */
  checkSettings: (c: Context) => void;
  /** The docs page's script (Node and Deno); on Workers the static assets serve it. */
  docsScript?: () => Promise<Uint8Array<ArrayBuffer>>;
}

/**
 * GET /healthz, answered before auth, so a probe works without a token: 200, or the 503
 * `not_configured` every other request would get while a setting does not parse; the
 * docs page's script, public (a pinned copy of a published library); /docs/, a redirect to
 * /docs; and, when PUBLIC_DOCS is on, /openapi.json and /docs without a token. With PUBLIC_DOCS off these two fall
 * through to the authenticated routes of `registerOpenApi`.
 */
export function serviceRoutes(options: ServiceRouteOptions) {
  const document = (c: Context) => openApiDocument(c, options.app);
  const publicOnly =
    (handler: MiddlewareHandler): MiddlewareHandler =>
    async (c, next) => {
      let open = false;
      try {
        open = parseServiceConfig(options.readEnvironment(c)).publicDocs;
      } catch {
        // A bad setting is reported by the authenticated route's config check.
      }
      return open ? handler(c, next) : next();
    };
  const router = createRouter().openapi(healthRoute, (c) => {
    options.checkSettings(c);
    return c.json({ ok: true as const }, 200);
  });
  router.get(
    '/openapi.json',
    publicOnly(async (c) => c.json(await document(c))),
  );
  router.get('/docs', publicOnly(docsPage(document)));
  // With a trailing slash, whatever PUBLIC_DOCS says: /docs, which asks a token where it needs one.
  router.get('/docs/', (c) => c.redirect(`/docs${new URL(c.req.url).search}`, 308));
  const script = options.docsScript;
  if (script) {
    router.get(DOCS_SCRIPT_PATH, async (c) =>
      c.body(await script(), 200, {
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'public, max-age=3600',
      }),
    );
  }
  return router;
}

/**
 * GET /openapi.json (generated from the zod schemas of every route; on Workers, that document as
 * `npm run assets` generated it: functions/openapi-document.ts) and GET /docs, behind auth.
 */
export function registerOpenApi(app: OpenAPIHono<AppEnv>): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  app.get('/openapi.json', async (c) => c.json(await openApiDocument(c, app)));
  app.get(
    '/docs',
    docsPage((c) => openApiDocument(c, app)),
  );
}
