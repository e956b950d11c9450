import { type AppOptions, createApp } from '../../functions/app.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { HttpHarness } from '../http/http-suite.ts';

/**
 * The real app in Node on `store`, reached through `app.request` with `environment`
 * (overridden per request by `fetchWithEnv`); what it logs goes to `logged`.
 */
export function appHarness(
  store: ObjectStore,
  environment: Record<string, string>,
  options: Partial<Omit<AppOptions, 'store'>> = {},
): HttpHarness {
  const logged: string[] = [];
  const app = createApp({
    store: () => store,
    readEnvironment: (c) => c.env ?? {},
    log: (line) => logged.push(line),
    ...options,
  });
  return {
    fetch: async (path, init) => app.request(path, init, environment),
    fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment, ...overrides }),
    store,
    keyPrefix: '',
    logged,
  };
}
