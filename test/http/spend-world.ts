import { expect } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

/**
 * The app on `baseURL` with the model settings `models`, with a token whose spend is read, the
 * work it does after its answers, and the statuses its provider requests were answered with,
 * each told once the call saw it (`answered`). On `store`, a MemoryStore unless given.
 */
export async function spendWorld(baseURL: string, models: Record<string, string>, store = new MemoryStore()) {
  const tasks: Promise<unknown>[] = [];
  const statuses: number[] = [];
  const waiting: (() => void)[] = [];
  const harness = appHarness(
    store,
    {
      API_TOKEN: TOKEN,
      TOKEN_SIGNING_KEY: SIGNING_KEY,
      OPENAI_COMPATIBLE_BASE_URL: baseURL,
      DEFAULT_MODEL: 'openai-compatible:fake-model',
      ...models,
    },
    {
      afterResponse: (task: Promise<unknown>) => void tasks.push(task),
      modelEnvironment: {
        fetch: async (input, init) => {
          const response = await fetch(input, init);
          statuses.push(response.status);
          // After the call's own continuation of this fetch has run.
          setImmediate(() => {
            for (const wake of waiting.splice(0)) wake();
          });
          return response;
        },
      },
    },
  );
  const api = createClient(harness);
  const minted = await api.post('/v1/tokens', {
    scopes: ['session:turn', 'session:read'],
    budget: { max_total_tokens: 1_000_000 },
  });
  expect(minted.status, JSON.stringify(minted.body)).toBe(201);
  const auth = { authorization: `Bearer ${minted.body.token as string}` };
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const answered = async (count: number) => {
    while (statuses.length < count) await new Promise<void>((wake) => waiting.push(wake));
    return statuses.slice(0, count);
  };
  return { api, harness, auth, drain, answered };
}
