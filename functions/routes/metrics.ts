import { createRoute } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { z } from 'zod';
import { parseServiceConfig } from '../../lib/config.ts';
import { constantTimeEqual } from '../auth.ts';
import { errorResponses } from '../openapi-helpers.ts';
import { createRouter, type RuntimeEnvironment } from '../router.ts';
import { requires } from '../tokens.ts';

const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/** What the routes serve: the process's metrics (functions/metrics.ts) as Prometheus text. */
interface RenderedMetrics {
  render(): string;
}

const metricsRoute = createRoute({
  method: 'get',
  path: '/metrics',
  tags: ['service'],
  summary: 'The process metrics in the Prometheus text format (Node and Deno only)',
  description:
    'Turns and errors by code, turn latency and time-to-first-token histograms, storage operations, tokens by ' +
    'kind and cost, counted by this process since it started. Also served to the bearer token METRICS_TOKEN.',
  security: requires('admin'),
  responses: {
    200: { description: 'Prometheus text', content: { [PROMETHEUS_TEXT]: { schema: z.string() } } },
    ...errorResponses(401, 403),
  },
});

/** GET /metrics for an admin token (the route of /openapi.json). */
export function metricsRoutes(metrics: RenderedMetrics) {
  return createRouter().openapi(metricsRoute, (c) =>
    c.text(metrics.render(), 200, { 'content-type': PROMETHEUS_TEXT }),
  );
}

/**
 * GET /metrics for the METRICS_TOKEN, answered before auth (a scraper holds no admin token);
 * any other request goes on to the authenticated route.
 */
export function metricsTokenRoute(metrics: RenderedMetrics, readEnvironment: (c: Context) => RuntimeEnvironment) {
  return createRouter().get('/metrics', async (c, next) => {
    let token: string | undefined;
    try {
      token = parseServiceConfig(readEnvironment(c)).metricsToken;
    } catch {
      // A bad setting is reported by the authenticated route's config check.
    }
    const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim();
    if (token === undefined || bearer === undefined || !constantTimeEqual(bearer, token)) return next();
    return c.body(metrics.render(), 200, { 'content-type': PROMETHEUS_TEXT });
  });
}
