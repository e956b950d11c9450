import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { clientInProcess } from './server.ts';

// `on_busy` is the native turn route's busy policy (docs/API.md, "Busy sessions"); the
// Responses API has none (docs/OPENAI.md). A request that sends it is refused naming where
// the policy is, not as a field tailgate does not support, which it does, on the native route.
const TOKEN = 'native-fields-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

describe('on_busy sent to POST /v1/responses', () => {
  it('is a 400 naming the native route that takes it', async () => {
    const store = new MemoryStore();
    const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
    const client = clientInProcess(app, TOKEN);
    const refused = await client.responses
      .create({ model: 'echo', input: 'hi', on_busy: 'enqueue' } as OpenAI.Responses.ResponseCreateParamsNonStreaming)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused).toMatchObject({ param: 'on_busy' });
    const { message } = refused as InstanceType<typeof OpenAI.BadRequestError>;
    expect(message).not.toContain('not supported by tailgate');
    expect(message).toContain('409 turn_in_progress');
    expect(message).toContain('POST /v1/sessions/{id}/turns');
  });
});

describe('on_busy sent to POST /v1/chat/completions', () => {
  const heldEcho = releasedAfterEach();
  it('is a 400 that says what a busy session does there: the completion is answered', async () => {
    const slow = heldEcho();
    const store = new MemoryStore();
    const { options, drain } = heldOptions(slow.model);
    const app = createApp({ store: () => store, readEnvironment: () => environment, ...options });
    const client = clientInProcess(app, TOKEN);
    const session = { headers: { 'x-tailgate-session': 'busy-chat' } };
    await app.request('/v1/sessions', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'busy-chat' }),
    });
    const running = client.responses.create({ model: 'echo', input: 'slow one', conversation: 'busy-chat' });
    await slow.reached;
    // While a turn of its session runs, a chat completion is answered (it takes no turn).
    const messages = [{ role: 'user' as const, content: 'hi' }];
    const answered = await client.chat.completions.create({ model: 'echo', messages }, session);
    expect(answered.choices[0]!.message.content).toBe('echo: hi');
    const refused = await client.chat.completions
      .create(
        { model: 'echo', messages, on_busy: 'enqueue' } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
        session,
      )
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    const { param, message } = refused as InstanceType<typeof OpenAI.BadRequestError>;
    expect(param).toBe('on_busy');
    expect(message).toContain('a chat completion is answered');
    expect(message).toContain('POST /v1/sessions/{id}/turns');
    slow.release();
    await running;
    await drain();
  });
});
