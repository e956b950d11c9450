import { UnsupportedPathError } from 'hono/router';
import { RegExpRouter } from 'hono/router/reg-exp-router';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import type { AppOptions } from '../../functions/app-options.ts';
import { Metrics } from '../../functions/metrics.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

// The Worker's bundle leaves hono's RegExpRouter out (wrangler.toml [alias],
// functions/hono-no-regexp-router.ts: one that takes no route), which changes nothing only while
// the real one refuses the app's routes, so that hono's SmartRouter matches with its TrieRouter.
describe("the app's router", () => {
  const script = async () => new Uint8Array(new ArrayBuffer(0));
  const runtimes: [string, Partial<AppOptions>][] = [
    ['Workers', {}],
    ['Node and Deno', { metrics: new Metrics(), docsScript: script, inspectorScript: script }],
  ];
  it.each(runtimes)('is TrieRouter on %s: RegExpRouter refuses its routes', async (_runtime, extra) => {
    const store = new MemoryStore();
    const app = createApp({
      store: () => store,
      log: () => {},
      readEnvironment: () => ({ ALLOW_ANONYMOUS: 'true' }),
      ...extra,
    });
    // As SmartRouter gives them: every route, then the first match.
    const routesIn = (routes: { method: string; path: string }[]) => () => {
      const router = new RegExpRouter<number>();
      for (const route of routes) router.add(route.method, route.path, 0);
      return router.match('GET', '/health');
    };
    expect(routesIn(app.routes)).toThrow(UnsupportedPathError);
    // A path static beside a parameter where the same method has a longer path.
    const pair = [
      { method: 'POST', path: '/v1/sessions/import' },
      { method: 'POST', path: '/v1/sessions/:id/fork' },
    ];
    expect(routesIn(pair)).toThrow(UnsupportedPathError);

    await app.request('http://localhost/v1/unknown');
    expect((app as unknown as { router: { name: string } }).router.name).toBe('SmartRouter + TrieRouter');
  });
});
