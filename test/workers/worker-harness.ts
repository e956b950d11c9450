import { createExecutionContext, env, SELF } from 'cloudflare:test';
import { afterEach, beforeEach } from 'vitest';
import worker from '../../functions/worker.ts';
import { R2Store } from '../../lib/store/r2.ts';
import type { HttpHarness } from '../http/http-suite.ts';

/**
 * The HTTP suites' harness inside workerd: requests go through the real worker (SELF) with
 * the local R2 bucket from wrangler.toml (vitest.config.ts passes API_TOKEN=test-token, a
 * TOKEN_SIGNING_KEY and the webhook settings); a request with other env variables calls the
 * worker's fetch with the bindings changed.
 */
export const bindings = env as unknown as Record<string, unknown> & { BUCKET: R2Bucket };
const origin = 'https://tailgate.test';

export function workerHarness(): HttpHarness {
  const logged: string[] = [];
  return {
    fetch: (path, init) => SELF.fetch(`${origin}${path}`, init),
    fetchWithEnv: async (overrides, path, init) => {
      const environment: Record<string, unknown> = { ...bindings };
      for (const [name, value] of Object.entries(overrides)) {
        if (value === undefined) delete environment[name];
        else environment[name] = value;
      }
      // The worker logs server-side failures with console.error: collect them for the tests that
      // expect one, instead of printing them.
      const error = console.error;
      console.error = (message?: unknown) => logged.push(String(message));
      try {
        return await worker.fetch(
          new Request(`${origin}${path}`, init) as never,
          environment as never,
          createExecutionContext(),
        );
      } finally {
        console.error = error;
      }
    },
    store: new R2Store(bindings.BUCKET),
    keyPrefix: typeof bindings.KEY_PREFIX === 'string' ? bindings.KEY_PREFIX : '',
    logged,
  };
}

/**
 * The worker's error lines of each test of the file calling this (its other console output
 * dropped), emptied before each test.
 */
export function consoleErrors(): string[] {
  const errors: string[] = [];
  const [error, log, info] = [console.error, console.log, console.info];
  beforeEach(() => {
    errors.length = 0;
    console.error = (...parts: unknown[]) => void errors.push(parts.map(String).join(' '));
    console.log = console.info = () => undefined;
  });
  afterEach(() => {
    [console.error, console.log, console.info] = [error, log, info];
  });
  return errors;
}
