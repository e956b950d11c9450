import { type Context, Hono } from 'hono';
import { parseServiceConfig } from '../../lib/config.ts';
import { needsToken } from '../auth.ts';
import type { RuntimeEnvironment } from '../router.ts';
import { inspectorFile } from './inspector-files.ts';

/**
 * GET /ui (the inspector page; /ui/ redirects to it), /ui/app.js, /ui/app.css and /ui/favicon.svg. They are public:
 * they hold no data, and everything the page shows is fetched from the API with the token the
 * user enters (kept in sessionStorage, sent as a bearer header). Registered before auth; not
 * part of the OpenAPI document. Nothing is fetched from another origin.
 *
 * The script is bundled from functions/ui/client/ into .assets/ui/app.js by `npm run assets`
 * (scripts/assets.mjs): on Workers the static assets serve it (wrangler.toml
 * `[assets]`), on Node and Deno `script` reads it (functions/local-server.ts: 503 `not_configured`
 * while it is not built). The page, stylesheet and icon are answered here everywhere, from
 * `inspectorFile` (functions/ui/inspector-files.ts; on Workers from the static assets too, with
 * these routes' headers: functions/ui/inspector-assets.ts).
 *
 * The page says whether the API needs a token (`withTokenMark`), so that a tab holding none asks
 * for it before calling the API; with settings that do not parse it says nothing, and the first
 * call shows the API's answer.
 */
export function inspectorRoutes(options: {
  script?: (() => Promise<Uint8Array<ArrayBuffer>>) | undefined;
  readEnvironment: (c: Context) => RuntimeEnvironment;
}): Hono {
  const tokenNeeded = (c: Context) => {
    try {
      return needsToken(parseServiceConfig(options.readEnvironment(c)));
    } catch {
      return false;
    }
  };
  const script = options.script;
  const headers = { 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' };
  const routes = new Hono()
    .get('/ui', async (c) =>
      c.html(withTokenMark(await inspectorFile(c, 'page.html'), tokenNeeded(c)), 200, {
        ...headers,
        'content-security-policy':
          "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data: blob:; " +
          "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
      }),
    )
    // With a trailing slash: the page, as without one (its assets are named from the root).
    .get('/ui/', (c) => c.redirect(`/ui${new URL(c.req.url).search}`, 308))
    .get('/ui/app.css', async (c) =>
      c.body(await inspectorFile(c, 'app.css'), 200, { ...headers, 'content-type': 'text/css; charset=utf-8' }),
    )
    .get('/ui/favicon.svg', async (c) =>
      c.body(await inspectorFile(c, 'favicon.svg'), 200, { ...headers, 'content-type': 'image/svg+xml' }),
    );
  if (script)
    routes.get('/ui/app.js', async (c) =>
      c.body(await script(), 200, { ...headers, 'content-type': 'text/javascript; charset=utf-8' }),
    );
  return routes;
}

/**
 * The page, its `<body>` marked `data-token="required"` when the API needs a bearer token
 * (functions/auth.ts `needsToken`): a tab holding none shows the token form without a refused call.
 */
function withTokenMark(page: string, tokenRequired: boolean): string {
  return tokenRequired ? page.replace('<body>', '<body data-token="required">') : page;
}
