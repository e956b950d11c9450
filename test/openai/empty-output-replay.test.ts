import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { parseSse } from '../http/http-suite.ts';
import { startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { clientInProcess } from './server.ts';

// A streamed turn whose model answered nothing (no text, no call), retried with its
// Idempotency-Key: the replay says what the first stream said.
const TOKEN = 'replay-token';
let provider: FakeProvider;
const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({
    id: 'c',
    object: 'chat.completion.chunk',
    created: 1,
    model: 'm',
    choices: [{ index: 0, delta, finish_reason: finish }],
  })}\n\n`;

beforeAll(async () => {
  provider = await startFakeProvider(() => ({
    sse: `${chunk({ role: 'assistant', content: '' })}${chunk({}, 'stop')}data: [DONE]\n\n`,
  }));
});
afterAll(() => provider.close());

function app() {
  const environment = {
    API_TOKEN: TOKEN,
    DEFAULT_MODEL: 'echo',
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_ALIASES: 'fake=openai-compatible:fake',
    MODEL_MAX_RETRIES: '0',
  };
  const store = new MemoryStore();
  const options: AppOptions = { store: () => store, readEnvironment: () => environment, log: () => {} };
  return createApp(options);
}

describe('the replay of a streamed turn with an empty output', () => {
  it('starts with the turn.started of the first run: the same first_seq', async () => {
    const tailgate = app();
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await tailgate.request('/v1/sessions', {
      method: 'POST',
      headers,
      body: JSON.stringify({ id: 'empty', model: 'openai-compatible:fake' }),
    });
    expect(created.status).toBe(201);
    const send = async () =>
      parseSse(
        await (
          await tailgate.request('/v1/sessions/empty/turns', {
            method: 'POST',
            headers: { ...headers, 'idempotency-key': 'k1' },
            body: JSON.stringify({ input: 'hi', stream: true }),
          })
        ).text(),
      );
    const first = await send();
    expect(first[0]).toEqual({ event: 'turn.started', data: { turn: 1, first_seq: 2 } });
    expect(first.at(-1)?.data.output).toEqual([]);
    const replay = await send();
    expect(replay[0]).toEqual({ event: 'turn.started', data: { turn: 1, first_seq: 2 } });
  });

  it('answers a retried streamed response under the first response id', async () => {
    const tailgate = app();
    const client = clientInProcess(tailgate, TOKEN);
    const options = { headers: { 'idempotency-key': 'retry-1' } };
    const first = await client.responses.stream({ model: 'fake', input: 'hello' }, options).finalResponse();
    const retried = await client.responses.stream({ model: 'fake', input: 'hello' }, options).finalResponse();
    expect(first.output).toEqual([]);
    expect(retried.id).toBe(first.id);
    expect((await client.responses.create({ model: 'fake', input: 'hello' }, options)).id).toBe(first.id);
    // After a later response in its conversation too, streamed and not.
    const next = await client.responses
      .stream({ model: 'fake', input: 'again', previous_response_id: first.id })
      .finalResponse();
    expect(next.id).not.toBe(first.id);
    const streamed = await client.responses.stream({ model: 'fake', input: 'hello' }, options).finalResponse();
    expect(streamed.id).toBe(first.id);
    expect((await client.responses.create({ model: 'fake', input: 'hello' }, options)).id).toBe(first.id);
  });
});
