import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The workers project runs the Worker from wrangler.toml, and wrangler hands it the variables of
 * a `.dev.vars` beside that file (without one, of `.env` files, which vitest.config.ts turns
 * off): a developer's model keys and DEFAULT_MODEL would reach the tests, which then fail or
 * call a paid provider. `npm start` reads `.dev.vars.local` first (its environment is `local`),
 * which the tests never read: the tests refuse to run beside a `.dev.vars` and say so.
 */
export function refuseDevVars(root: string): void {
  if (!existsSync(join(root, '.dev.vars'))) return;
  throw new Error(
    'tailgate: .dev.vars would reach the workers tests (wrangler hands its variables to the Worker ' +
      'under test: model keys, DEFAULT_MODEL); rename it .dev.vars.local, which npm start reads first',
  );
}
