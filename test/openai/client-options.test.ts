import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnTailgate, startTailgate, TOKEN } from './server.ts';

// Options real clients send that tailgate takes (docs/OPENAI.md, "Fields").
const world = clientOnTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });

describe('log probabilities', () => {
  it("takes the AI SDK's logprobs option: output_text carries the provider's logprobs, [] for none", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: world.tailgate.baseURL });
    const options = { openai: { logprobs: true } };
    const result = await generateText({ model: openai('gpt-4.1-mini'), prompt: 'hi', providerOptions: options });
    expect(result.text).toBe('echo: hi');
    expect(result.providerMetadata?.openai?.logprobs).toEqual([[]]);
    const streamed = streamText({ model: openai('gpt-4.1-mini'), prompt: 'hi', providerOptions: options });
    expect(await streamed.text).toBe('echo: hi');

    const response = await world.client.responses.create({
      model: 'echo',
      input: 'hi',
      include: ['message.output_text.logprobs'],
      top_logprobs: 5,
    });
    expect(response.top_logprobs).toBe(5);
    const message = response.output[0];
    expect(message?.type === 'message' && message.content[0]).toMatchObject({ type: 'output_text', logprobs: [] });
  });
});

describe('a request without model', () => {
  let wire: FakeProvider;
  let tailgate: Awaited<ReturnType<typeof startTailgate>>;
  let client: OpenAI;
  beforeAll(async () => {
    wire = await startFakeProvider(() => ({ json: JSON.parse(fixture('openai-chat-text.json')) }));
    tailgate = await startTailgate({
      OPENAI_API_KEY: 'test-key',
      OPENAI_BASE_URL: wire.baseURL,
      MODEL_MAX_RETRIES: '0',
      DEFAULT_MODEL: 'openai:gpt-5.2',
    });
    client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
  });
  afterAll(async () => {
    await tailgate.close();
    await wire.close();
  });

  it("runs DEFAULT_MODEL, or under previous_response_id or conversation the conversation's model", async () => {
    const fresh = await client.responses.create({ input: 'hi' } as never);
    expect(fresh).toMatchObject({ status: 'completed', model: 'openai:gpt-5.2' });
    expect(wire.requests.at(-1)!.body).toMatchObject({ model: 'gpt-5.2' });
    const stateless = await client.responses.create({ input: 'hi', store: false, model: null } as never);
    expect(stateless).toMatchObject({ status: 'completed', model: 'openai:gpt-5.2' });
    expect(wire.requests).toHaveLength(2);

    const first = await client.responses.create({ model: 'echo', input: 'one' });
    const next = await client.responses.create({ previous_response_id: first.id, input: 'two' } as never);
    expect(next).toMatchObject({ model: 'echo', output_text: 'echo: two' });
    const under = await client.responses.create({ conversation: first.conversation!.id, input: 'three' } as never);
    expect(under).toMatchObject({ model: 'echo', output_text: 'echo: three' });
    expect((await client.responses.retrieve(under.id)).model).toBe('echo');
    expect(wire.requests).toHaveLength(2);
  });
});
