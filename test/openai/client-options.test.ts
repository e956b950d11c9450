import { createOpenAI } from '@ai-sdk/openai';
import { generateText, streamText } from 'ai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, TOKEN } from './server.ts';

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
