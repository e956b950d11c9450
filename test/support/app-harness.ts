import { createApp } from '../../functions/app.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { HttpHarness } from '../http/http-suite.ts';

/** An HttpHarness through the app in Node on `store`, with `environment` as every request's env. */
export function appHarness(store: ObjectStore, environment: Record<string, string>): HttpHarness {
  const logged: string[] = [];
  const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: (line) => logged.push(line) });
  return {
    fetch: async (path, init) => app.request(path, init, environment),
    fetchWithEnv: async (overrides, path, init) => app.request(path, init, { ...environment, ...overrides }),
    store,
    keyPrefix: '',
    logged,
  };
}
