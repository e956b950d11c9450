import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { createRouter, type AppEnv } from '../router.ts';
import { renderDocsPage } from '../docs-page.ts';
import { healthSchema } from '../schemas.ts';

const healthRoute = createRoute({
  method: 'get',
  path: '/healthz',
  tags: ['service'],
  summary: 'Liveness check (no auth)',
  security: [],
  responses: { 200: { description: 'The service is up', content: { 'application/json': { schema: healthSchema } } } },
});

/** GET /healthz: answered before auth and config, so a probe works on any deployment. */
export function serviceRoutes() {
  return createRouter().openapi(healthRoute, (c) => c.json({ ok: true as const }, 200));
}

const OPENAPI_INFO = {
  openapi: '3.0.3',
  info: {
    title: 'tailgate',
    version: '1.0.0',
    description: 'Stateless HTTP service for long-running LLM agent conversations.',
  },
  security: [{ bearer: [] }],
};

/** GET /openapi.json (generated from the zod schemas of every route) and GET /docs. */
export function registerOpenApi(app: OpenAPIHono<AppEnv>): void {
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer' });
  app.doc('/openapi.json', OPENAPI_INFO);
  app.get('/docs', (c) => c.html(renderDocsPage(app.getOpenAPIDocument(OPENAPI_INFO))));
}
