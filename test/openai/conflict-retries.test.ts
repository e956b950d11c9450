import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SIGNING_KEY } from '../http/http-suite.ts';
import { TOKEN } from './server.ts';

// The official client retries a 409 (twice by default) unless the answer says
// `x-should-retry: false`. A conflict that a retry cannot clear says it, so the client throws at
// once instead of sending the same refused request again.
const store = new MemoryStore();
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, ALLOW_ANONYMOUS: 'false' };
const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
const requests: string[] = [];
// The client's defaults: maxRetries 2.
const client = new OpenAI({
  apiKey: TOKEN,
  baseURL: 'http://tailgate.test/v1',
  fetch: async (url: string | URL | Request, init?: RequestInit) => {
    requests.push(`${init?.method ?? 'GET'} ${new URL(String(url)).pathname}`);
    return app.request(String(url), init);
  },
});

async function refusal(work: () => Promise<unknown>): Promise<{ error: unknown; sent: string[] }> {
  requests.length = 0;
  const error = await work().then(
    () => 'succeeded',
    (caught: unknown) => caught,
  );
  return { error, sent: [...requests] };
}

describe('a conflict no retry clears is not retried by the official client', () => {
  it('delete_refused: deleting a response another came after', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'first' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'second' });
    const { error, sent } = await refusal(() => client.responses.delete(first.id));
    expect(error).toBeInstanceOf(OpenAI.ConflictError);
    expect(error).toMatchObject({ code: 'delete_refused' });
    expect((error as InstanceType<typeof OpenAI.ConflictError>).headers.get('x-should-retry')).toBe('false');
    expect(sent).toEqual([`DELETE /v1/responses/${first.id}`]);
  });
});
