import { UnsupportedPathError } from 'hono/router';

/**
 * Hono's RegExpRouter in the Worker (wrangler.toml [alias] puts this in its place): one that takes
 * no route. Hono's default router (`SmartRouter`) tries RegExpRouter first and, when that refuses
 * the app's routes, matches with TrieRouter; RegExpRouter refuses tailgate's (a static path beside
 * a parameter where the same method has a longer path: POST /v1/sessions/import beside
 * POST /v1/sessions/:id/fork), as test/http/router-choice.test.ts holds. This one refuses at once,
 * so the Worker matches with TrieRouter as before, and its bundle leaves RegExpRouter out.
 */
export class RegExpRouter {
  name = 'RegExpRouter';
  add(): never {
    throw new UnsupportedPathError();
  }
  match(): never {
    throw new UnsupportedPathError();
  }
}
