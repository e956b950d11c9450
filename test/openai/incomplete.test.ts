import type { ResponseOutputItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { fixture } from '../support/fake-providers/fake-provider-server.ts';
import { clientOnFakeOpenAI, TOKEN } from './server.ts';

// An OpenAI model on a loopback fake provider whose answers stop at their token limit
// (finish_reason "length"), streamed (the recorded stream, its finish reason changed) or not.
const truncated = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-4o-mini',
  choices: [
    {
      index: 0,
      message: { role: 'assistant', refusal: null, content: 'The answer is' },
      logprobs: null,
      finish_reason: 'length',
    },
  ],
  usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
};

const streamed = fixture('openai-chat-text.sse').replace('"finish_reason":"stop"', '"finish_reason":"length"');
const world = clientOnFakeOpenAI((request) => (request.body.stream ? { sse: streamed } : { json: truncated }));

describe('an answer cut at its token limit says so', () => {
  it('chat completions: finish_reason "length", streamed or not', async () => {
    const answer = await world.client.chat.completions.create({
      model: 'gpt-4o-mini',
      max_completion_tokens: 3,
      messages: [{ role: 'user', content: 'question' }],
    });
    expect(answer.choices[0]!.message.content).toBe('The answer is');
    expect(answer.choices[0]!.finish_reason).toBe('length');
    const chunks = await world.client.chat.completions.create({
      model: 'gpt-4o-mini',
      stream: true,
      messages: [{ role: 'user', content: 'question' }],
    });
    const reasons: unknown[] = [];
    for await (const chunk of chunks) reasons.push(...chunk.choices.map((choice) => choice.finish_reason));
    expect(reasons.filter((reason) => reason !== null)).toEqual(['length']);
  });

  it.each([true, false])('responses: incomplete, reason max_output_tokens (store %s)', async (store) => {
    const response = await world.client.responses.create({
      model: 'gpt-4o-mini',
      max_output_tokens: 16,
      input: 'q',
      store,
    });
    expect(response.output_text).toBe('The answer is');
    expect(response.status).toBe('incomplete');
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    if (store) expect((await world.client.responses.retrieve(response.id)).status).toBe('incomplete');
    const stream = world.client.responses.stream({ model: 'gpt-4o-mini', input: 'q', store });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types.at(-1)).toBe('response.incomplete');
    expect(types).not.toContain('response.completed');
  });

  // The Open Responses item lifecycle: the item a token limit cut is `incomplete`, as OpenAI answers it.
  it.each([true, false])('the message cut short is done incomplete, streamed or not (store %s)', async (store) => {
    const statuses = (output: readonly ResponseOutputItem[]) =>
      output.map((item) => `${item.type} ${'status' in item ? item.status : ''}`);
    const response = await world.client.responses.create({ model: 'gpt-4o-mini', input: 'q', store });
    expect(statuses(response.output)).toEqual(['message incomplete']);
    const stream = world.client.responses.stream({ model: 'gpt-4o-mini', input: 'q', store });
    const done: string[] = [];
    for await (const event of stream)
      if (event.type === 'response.output_item.done') done.push(...statuses([event.item]));
    expect(done).toEqual(['message incomplete']);
    const streamed = await stream.finalResponse();
    expect(statuses(streamed.output)).toEqual(['message incomplete']);
    if (!store) return;
    for (const { id } of [response, streamed])
      expect(statuses((await world.client.responses.retrieve(id)).output)).toEqual(['message incomplete']);
  });

  it("the native turn's response says incomplete: max_output_tokens", async () => {
    const native = (path: string, body: unknown) =>
      fetch(`${world.tailgate.baseURL.replace(/\/v1$/, '')}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const created = await native('/v1/sessions', { model: 'openai:gpt-4o-mini' });
    const session = (await created.json()) as { id: string };
    expect(created.status, JSON.stringify(session)).toBe(201);
    const { id } = session;
    const turn = await native(`/v1/sessions/${id}/turns`, { input: 'question' });
    const body = (await turn.json()) as { incomplete?: string };
    expect(turn.status, JSON.stringify(body)).toBe(200);
    expect(body.incomplete).toBe('max_output_tokens');
  });

  it("a background response ends incomplete, and its turn's detail says why", async () => {
    const created = await world.client.responses.create({ model: 'gpt-4o-mini', input: 'q', background: true });
    let response = created;
    for (let polls = 0; polls < 400 && ['queued', 'in_progress'].includes(response.status!); polls++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      response = await world.client.responses.retrieve(created.id);
    }
    expect(response.status).toBe('incomplete');
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    const detail = await fetch(`${world.tailgate.baseURL}/sessions/${response.conversation!.id}/turns/1`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(((await detail.json()) as { incomplete?: string }).incomplete).toBe('max_output_tokens');
  });
});
