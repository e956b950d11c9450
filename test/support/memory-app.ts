import { type AppOptions, createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { HttpHarness } from '../http/http-suite.ts';

/**
 * The real app in Node on an in-memory store, reached through `app.request` with
 * `environment` (overridden per request by `fetchWithEnv`); what it logs goes to `logged`.
 */
export function memoryAppHarness(
  environment: Record<string, string>,
  options: Partial<Omit<AppOptions, 'store'>> = {},
): HttpHarness {
  const store = new MemoryStore();
  const logged: string[] = [];
  const app = createApp({
    store: () => store,
    readEnvironment: (c) => c.env ?? {},
    log: (message) => logged.push(message),
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
