import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { answeringCall, deadSecondStep, diesSending, HOUR, processOf } from '../support/dead-process.ts';
import { clientOnTailgate, tailgatePost } from './server.ts';

/**
 * `responses.inputTokens.count` of a conversation's next turn where a create refuses the input
 * for the calls it answers, or would not store again what a failed attempt of the step stored,
 * or takes a dead turn out first: the count refuses what the create refuses, and counts the
 * prompt the create would send. "unreachable" fails every model call.
 */
const world = clientOnTailgate({
  OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
  MODEL_MAX_RETRIES: '0',
  MODEL_ALIASES: 'unreachable=openai-compatible:nothing',
});
const refused = (promise: Promise<unknown>) => promise.catch((error: unknown) => error);
const count = async (body: OpenAI.Responses.InputTokenCountParams, client = world.client) =>
  (await client.responses.inputTokens.count(body)).input_tokens;
const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];

/** A conversation whose newest response called get_weather: the history so far and the output answering it. */
async function calling(city: string) {
  const ask = `call get_weather {"city":"${city}"}`;
  const first = await world.client.responses.create({ model: 'echo', input: ask, tools });
  const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  const history: OpenAI.Responses.ResponseInputItem[] = [
    { role: 'user', content: ask },
    { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments },
  ];
  const answer = { type: 'function_call_output' as const, call_id: call.call_id, output: '10C' };
  return { first, conversation: first.conversation!.id, history, answer };
}

describe('responses.inputTokens.count of an output answering no open call', () => {
  it.each(['conversation', 'previous_response_id'] as const)(
    'is refused under %s with the 400 a create answers',
    async (how) => {
      const { first, conversation } = await calling('Oslo');
      const stray = { type: 'function_call_output' as const, call_id: 'call_none', output: 'x' };
      const body = {
        model: 'echo',
        tools,
        input: [{ role: 'user' as const, content: 'next' }, stray],
        ...(how === 'conversation' ? { conversation } : { previous_response_id: first.id }),
      };
      const created = await refused(world.client.responses.create(body));
      const counted = await refused(count(body));
      expect(created).toBeInstanceOf(OpenAI.BadRequestError);
      const { message, param, code } = created as { message: string; param: unknown; code: unknown };
      expect(param).toBe('input[1].call_id');
      expect(counted).toBeInstanceOf(OpenAI.BadRequestError);
      expect(counted).toMatchObject({ message, param, code });
    },
  );
});

describe('responses.inputTokens.count of a step whose streamed attempt failed', () => {
  it('leaves out the outputs that attempt stored, as the create retrying the step takes them again', async () => {
    const { conversation, history, answer } = await calling('Lima');
    const step = [answer, { role: 'user' as const, content: 'and in Accra, a little further east?' }];
    const failed = await world.client.responses.create({
      model: 'unreachable',
      conversation,
      input: step,
      tools,
      stream: true,
    });
    for await (const event of failed) expect(event.type).not.toBe('response.completed');
    const counted = await count({ model: 'echo', conversation, input: step, tools });
    expect(counted).toBe(await count({ model: 'echo', input: [...history, ...step], tools }));
    const retried = await world.client.responses.create({ model: 'echo', conversation, input: step, tools });
    expect(retried.output_text).toBe('echo: and in Accra, a little further east?');
  });
});

describe('responses.inputTokens.count of a conversation whose newest turn is dead', () => {
  it('counts the input once, as the create that takes that turn out first stores it', async () => {
    const { store, id, body } = await deadSecondStep();
    const { openai } = processOf(store, 3 * HOUR);
    const whole = [
      { role: 'user' as const, content: 'step 1' },
      { role: 'assistant' as const, content: 'echo: step 1' },
      { role: 'user' as const, content: 'step 2' },
    ];
    const counted = await count({ model: 'echo', ...body }, openai);
    expect(counted).toBe(await count({ model: 'echo', input: whole }, openai));
    expect((await openai.responses.create(body)).conversation?.id).toBe(id);
  });

  it('refuses a step whose dead turn answered its calls while its lease runs, with the 409 of a create', async () => {
    const { store, body } = await answeringCall();
    await diesSending(store, HOUR, body);
    const { openai } = processOf(store, HOUR + 1000);
    const created = await refused(openai.responses.create(body));
    expect(created).toMatchObject({ status: 409, code: 'turn_in_progress' });
    const counted = await refused(count({ model: 'echo', ...body }, openai));
    expect(counted).toMatchObject({ status: 409, code: 'turn_in_progress' });
  });
});

describe('responses.inputTokens.count of the request an abort notice refused', () => {
  it('is refused again under conversation, as a create retrying it is', async () => {
    const { id: conversation } = await world.client.conversations.create({});
    await world.client.responses.create({ model: 'echo', conversation, input: 'first' });
    await tailgatePost(world.tailgate.baseURL, `/sessions/${conversation}/inbox`, { name: 'abort', content: 'stop' });
    const body = { model: 'echo', conversation, input: 'second' };
    const aborted = await refused(world.client.responses.create(body));
    expect(aborted).toMatchObject({ status: 409 });
    const counted = await refused(count(body));
    const retried = await refused(world.client.responses.create(body));
    expect(retried).toMatchObject({ status: 409, message: (aborted as Error).message });
    expect(counted).toMatchObject({ status: 409, message: (aborted as Error).message });
  });
});

describe('responses.inputTokens.count under a previous_response_id its conversation went on after', () => {
  it("counts a loop's step that resent every item since, as the create that continues the newest", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'the first step of a loop' });
    const second = { role: 'user' as const, content: 'its second step' };
    const next = await world.client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [second],
    });
    const input = [
      second,
      { role: 'assistant' as const, content: next.output_text },
      { role: 'user' as const, content: 'third' },
    ];
    const body = { model: 'echo', previous_response_id: first.id, input };
    const whole = [
      { role: 'user' as const, content: 'the first step of a loop' },
      { role: 'assistant' as const, content: first.output_text },
      ...input,
    ];
    expect(await count(body)).toBe(await count({ model: 'echo', input: whole }));
    expect((await world.client.responses.create(body)).conversation?.id).toBe(first.conversation?.id);
  });

  it('counts a step retried after its failed streamed attempt, as the create that takes it again', async () => {
    const { first, history, answer } = await calling('Quito');
    const step = [answer, { role: 'user' as const, content: 'and in Accra, a little further east?' }];
    const body = { model: 'echo', previous_response_id: first.id, input: step, tools };
    const failed = await world.client.responses.create({ ...body, model: 'unreachable', stream: true });
    for await (const event of failed) expect(event.type).not.toBe('response.completed');
    expect(await count(body)).toBe(await count({ model: 'echo', input: [...history, ...step], tools }));
    expect((await world.client.responses.create(body)).conversation?.id).toBe(first.conversation?.id);
  });
});
