import { Hono } from 'hono';
import { inspectorClient } from './client.ts';
import { INSPECTOR_PAGE } from './page.ts';
import { INSPECTOR_CSS } from './styles.ts';

/**
 * GET /ui (the inspector page), /ui/app.js and /ui/app.css. They are public: they hold no
 * data, and everything the page shows is fetched from the API with the token the user
 * enters (kept in sessionStorage, sent as a bearer header). Registered before auth; not part
 * of the OpenAPI document. Nothing is fetched from another origin.
 */
export function inspectorRoutes(): Hono {
  // The bundler of `wrangler dev`/`deploy` keeps function names with a `__name(fn, name)`
  // helper that lives outside the function; the served text brings its own.
  const script =
    `var __name = (target, value) => Object.defineProperty(target, 'name', { value, configurable: ` +
    `true });\n(${inspectorClient.toString()})();\n`;
  const headers = { 'cache-control': 'no-cache', 'x-content-type-options': 'nosniff' };
  return new Hono()
    .get('/ui', (c) =>
      c.html(INSPECTOR_PAGE, 200, {
        ...headers,
        'content-security-policy':
          "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
      }),
    )
    .get('/ui/app.js', (c) => c.body(script, 200, { ...headers, 'content-type': 'text/javascript; charset=utf-8' }))
    .get('/ui/app.css', (c) => c.body(INSPECTOR_CSS, 200, { ...headers, 'content-type': 'text/css; charset=utf-8' }));
}
