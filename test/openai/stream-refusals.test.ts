import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate } from './server.ts';

// The echo model with a small window (prompts of at most 100 tokens): a prompt of 2000
// characters (500 tokens) is OpenAI's 400 context_length_exceeded, streamed or not.
const world = clientOnTailgate({ CONTEXT_LIMIT: '120', RESPONSE_RESERVE: '20' });
const long = 'x'.repeat(2000);

describe('a request refused before the model is called is a 400 when streamed too', () => {
  it('chat completions, stream: true', async () => {
    const plain = await world.client.chat.completions
      .create({ model: 'echo', messages: [{ role: 'user', content: long }] })
      .catch((error: unknown) => error);
    expect(plain).toBeInstanceOf(OpenAI.BadRequestError);
    const streamed = await world.client.chat.completions
      .create({ model: 'echo', stream: true, messages: [{ role: 'user', content: long }] })
      .catch((error: unknown) => error);
    expect(streamed).toBeInstanceOf(OpenAI.BadRequestError);
    expect(streamed).toMatchObject({ status: 400, code: 'context_length_exceeded' });
  });

  it('responses with store: false, stream: true (as the stored ones are)', async () => {
    const stored = await world.client.responses
      .create({ model: 'echo', stream: true, input: long })
      .catch((error: unknown) => error);
    expect(stored).toBeInstanceOf(OpenAI.BadRequestError);
    const stateless = await world.client.responses
      .create({ model: 'echo', stream: true, store: false, input: long })
      .catch((error: unknown) => error);
    expect(stateless).toBeInstanceOf(OpenAI.BadRequestError);
    expect(stateless).toMatchObject({ status: 400, code: 'context_length_exceeded' });
  });
});
