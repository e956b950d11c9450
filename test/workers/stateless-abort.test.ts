import { describe, expect, it } from 'vitest';
import { TOKEN } from '../http/http-suite.ts';
import { workerHarness } from './worker-harness.ts';

// A request that stores nothing whose client aborts it while its model runs, inside workerd: the
// Worker's request signal aborts (the `enable_request_signal` compatibility flag, wrangler.toml),
// or its stream is cancelled, so its model call stops; what follows (the charge of a budgeted
// token, the notices it took given back) still lands after the client is gone, as on Node and Deno
// (test/openai/stateless-abort.test.ts). Its model (echo) waits a minute unless aborted.

const harness = workerHarness();
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

const post = (path: string, body: unknown, init: RequestInit = {}) =>
  harness.fetch(path, {
    method: 'POST',
    ...init,
    headers: { ...headers, ...init.headers },
    body: JSON.stringify(body),
  });

/** The names of the notices pending in session `id`'s inbox. */
async function pending(id: string): Promise<string[]> {
  const listed = await harness.fetch(`/v1/sessions/${id}/inbox`, { headers });
  return ((await listed.json()) as { pending: { name: string }[] }).pending.map((notice) => notice.name);
}

/** A token with a budget, and what it has spent. */
async function budgeted() {
  const minted = await post('/v1/tokens', { scopes: ['session:turn'], budget: { max_total_tokens: 100_000 } });
  expect(minted.status).toBe(201);
  const { token } = (await minted.json()) as { token: string };
  const spent = async () => {
    const current = await harness.fetch('/v1/tokens/current', { headers: { authorization: `Bearer ${token}` } });
    return ((await current.json()) as { usage: { input_tokens: number; output_tokens: number } }).usage;
  };
  return { token, spent };
}

describe('workerd: a request storing nothing that its client aborts', () => {
  it.each([false, true])(
    'a chat completion (streamed: %s) stops its model call, charged, and gives back the notice it took',
    async (stream) => {
      const { token, spent } = await budgeted();
      const id = `stateless-abort-${crypto.randomUUID()}`;
      expect((await post('/v1/sessions', { id })).status).toBe(201);
      // The notice is the prompt's last user message: echo waits as it says.
      expect((await post(`/v1/sessions/${id}/inbox`, { name: 'note', content: 'wait 60000 note' })).status).toBe(201);
      const controller = new AbortController();
      const made = post(
        '/v1/chat/completions',
        { model: 'echo', messages: [{ role: 'user', content: 'hi' }], stream },
        { headers: { authorization: `Bearer ${token}`, 'x-tailgate-session': id }, signal: controller.signal },
      ).catch((error: unknown) => error);
      // Taken: the call runs.
      await expect.poll(() => pending(id), { timeout: 15_000 }).toEqual([]);
      controller.abort();
      const answer = await made;
      if (answer instanceof Response) await answer.body?.cancel().catch(() => undefined);
      await expect.poll(async () => (await spent()).input_tokens, { timeout: 15_000 }).toBeGreaterThan(0);
      expect((await spent()).output_tokens).toBe(0);
      await expect.poll(() => pending(id), { timeout: 15_000 }).toEqual(['note']);
    },
  );

  it('a streamed store: false response charges its budgeted token what its call spent', async () => {
    const { token, spent } = await budgeted();
    const controller = new AbortController();
    const response = await post(
      '/v1/responses',
      { model: 'echo', input: 'wait 60000 hi', store: false, stream: true },
      { headers: { authorization: `Bearer ${token}` }, signal: controller.signal },
    );
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    // response.created: the call runs.
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('response.created');
    controller.abort();
    await reader.cancel().catch(() => undefined);
    await expect.poll(async () => (await spent()).input_tokens, { timeout: 15_000 }).toBeGreaterThan(0);
    expect((await spent()).output_tokens).toBe(0);
  });
});
