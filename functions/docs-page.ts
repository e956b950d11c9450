import { Scalar } from '@scalar/hono-api-reference';
import type { Context, MiddlewareHandler } from 'hono';

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
 * The /docs page's Content-Security-Policy for `nonce`: scripts only from the service itself or
 * carrying the response's nonce (the inline start-up scripts), and no `eval`; styles from the
 * service or inline (the reference draws its theme as a `<style>` element of its own making and
 * sets `style` attributes, neither of which a nonce or hash can name); images and fonts from the
 * service or inline; requests ("Test Request") to the service only; no frames, forms or
 * `<base>`; and the page framed by no one.
 */
export function docsPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'self' 'nonce-${nonce}'`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** 128 random bits, base64: a nonce no one can guess before the response names it. */
function randomNonce(): string {
  return btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
}

/**
 * A script that sets the bundle's zod to run without compiling validators (`z.config({ jitless })`,
 * kept on `globalThis.__zod_globalConfig`): otherwise it probes whether it may with `Function('')`,
 * which the policy refuses, a violation reported on every visit.
 */
function jitless(nonce: string): string {
  return `  <script nonce="${nonce}">globalThis.__zod_globalConfig = { jitless: true };</script>`;
}

/**
 * The /docs page: the OpenAPI document rendered by Scalar's API reference
 * (@scalar/hono-api-reference), with the document embedded in the page so it needs no second
 * request, the bundle from the service itself, the inspector's icon (without one the browser
 * asks for /favicon.ico, a 404), and no web fonts, telemetry or other outside calls: nor any
 * control that calls Scalar's service (its agent, "Ask AI", uploads the document there; its
 * MCP generator; its developer toolbar, shown on localhost, to share, deploy or make SDKs).
 * Each response has a nonce of its own, which its Content-Security-Policy (`docsPolicy`) names,
 * and is stored by no cache (`no-store`), which would serve that nonce again.
 */
export function docsPage(document: (c: Context) => Promise<object>): MiddlewareHandler {
  return async (c, next) => {
    const nonce = randomNonce();
    c.header('content-security-policy', docsPolicy(nonce));
    c.header('x-content-type-options', 'nosniff');
    // A page served again from a cache would name its nonce again.
    c.header('cache-control', 'no-store');
    const content = (await document(c)) as Record<string, unknown>;
    const render = Scalar(() => ({
      content,
      cdn: DOCS_SCRIPT_PATH,
      nonce,
      pageTitle: 'tailgate API',
      favicon: '/ui/favicon.svg',
      withDefaultFonts: false,
      telemetry: false,
      agent: { disabled: true },
      mcp: { disabled: true },
      showDeveloperTools: 'never' as const,
    }));
    const page = await render(c, next);
    if (!(page instanceof Response)) return page;
    return c.html((await page.text()).replace('</head>', `${jitless(nonce)}\n  </head>`));
  };
}
