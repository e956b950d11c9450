import { Scalar } from '@scalar/hono-api-reference';
import type { MiddlewareHandler } from 'hono';

/**
 * Where the service serves Scalar's API reference bundle (@scalar/api-reference, pinned in
 * package.json): on Workers from the static assets (wrangler.toml `[assets]`, filled by
 * `npm run assets`), on Node and Deno from node_modules (`createApp({ docsScript })`). The
 * page loads nothing from anywhere else.
 */
export const DOCS_SCRIPT_PATH = '/docs/scalar-api-reference.js';

/** The file the bundle is read from on Node and Deno, and copied from into the Workers assets. */
export const DOCS_SCRIPT_SOURCE = 'node_modules/@scalar/api-reference/dist/browser/standalone.js';

/**
 * The /docs page: the OpenAPI document rendered by Scalar's API reference
 * (@scalar/hono-api-reference), with the document embedded in the page so it needs no second
 * request, the bundle from the service itself, the inspector's icon (without one the browser
 * asks for /favicon.ico, a 404), and no web fonts, telemetry or other outside calls: nor any
 * control that calls Scalar's service (its agent, "Ask AI", uploads the document there; its
 * MCP generator; its developer toolbar, shown on localhost, to share, deploy or make SDKs).
 */
export function docsPage(document: () => object): MiddlewareHandler {
  return Scalar(() => ({
    content: document() as Record<string, unknown>,
    cdn: DOCS_SCRIPT_PATH,
    pageTitle: 'tailgate API',
    favicon: '/ui/favicon.svg',
    withDefaultFonts: false,
    telemetry: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    showDeveloperTools: 'never' as const,
  }));
}
