import { Agent, OpenAIProvider, Runner } from '@openai/agents';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTailgate, TOKEN } from './server.ts';
import { agentsTracingOff } from './agents-tracing.ts';

// @openai/agents over Chat Completions sends its history back on the next run: each assistant
// text as a part carrying what it kept of the message (its `role` and `refusal`, or, streamed,
// `annotations`), as it does after an OpenAI answer.
let tailgate: Awaited<ReturnType<typeof startTailgate>>;

agentsTracingOff();
beforeAll(async () => {
  tailgate = await startTailgate();
});
afterAll(() => tailgate.close());

function chatRunner() {
  const provider = new OpenAIProvider({
    openAIClient: new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 }),
    useResponses: false,
  });
  return new Runner({ modelProvider: provider, tracingDisabled: true });
}

describe('@openai/agents over Chat Completions, a second run on the first run history', () => {
  const agent = new Agent({ name: 'chat', instructions: 'Be brief.', model: 'echo' });

  it('answers after a run that was not streamed', async () => {
    const runner = chatRunner();
    const first = await runner.run(agent, 'hello');
    expect(first.finalOutput).toBe('echo: hello');
    const second = await runner.run(agent, [...first.history, { role: 'user', content: 'and again' }]);
    expect(second.finalOutput).toBe('echo: and again');
  });

  it('answers after a streamed run', async () => {
    const runner = chatRunner();
    const first = await runner.run(agent, 'hello', { stream: true });
    for await (const _event of first);
    await first.completed;
    expect(first.finalOutput).toBe('echo: hello');
    const second = await runner.run(agent, [...first.history, { role: 'user', content: 'and again' }], {
      stream: true,
    });
    for await (const _event of second);
    await second.completed;
    expect(second.finalOutput).toBe('echo: and again');
  });
});

describe('Chat Completions, an answer sent back as its message came', () => {
  it('takes the message with its annotations', async () => {
    const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
    const answer = { role: 'assistant' as const, content: 'echo: hello', refusal: null, annotations: [] };
    const completion = await client.chat.completions.create({
      model: 'echo',
      messages: [{ role: 'user', content: 'hello' }, answer, { role: 'user', content: 'and again' }],
    });
    expect(completion.choices[0]?.message.content).toBe('echo: and again');
  });
});
