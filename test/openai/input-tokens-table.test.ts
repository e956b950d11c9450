import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { countPromptTokens } from '../../lib/tokens/token-counter.ts';
import { tokenCounterFor } from '../../lib/tokens/model-limits.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { answeringCall, deadSecondStep, diesSending, HOUR } from '../support/dead-process.ts';
import { clientInProcess, TOKEN } from './server.ts';

/**
 * For stored conversations of many shapes, `responses.inputTokens.count` of a body, then the
 * create of that same body: the count is the tokens of the prompt the create sent its model
 * (as that model's counter counts them), or both are refused alike; and the count writes nothing.
 */

const environment = {
  API_TOKEN: TOKEN,
  DEFAULT_MODEL: 'echo',
  TURN_LEASE_MS: '3000',
  OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:9/v1',
  MODEL_MAX_RETRIES: '0',
  MODEL_ALIASES: 'unreachable=openai-compatible:nothing',
  // An openai: model, which takes at most 128 tools, configured: its create is refused before any call.
  OPENAI_API_KEY: 'sk-test',
  OPENAI_BASE_URL: 'http://127.0.0.1:9/v1',
};

/** An app on `store` (its clock `offset` ms ahead) whose echo model's requests are kept in `sent`. */
function recording(store: MemoryStore = new MemoryStore(), offset = 0) {
  const counting = new CountingStore(store);
  const sent: ModelRequest[] = [];
  const wrap = (model: Model): Model =>
    model.id !== 'echo'
      ? model
      : {
          ...model,
          generate: (request) => {
            sent.push(request);
            return model.generate(request);
          },
          stream: (request) => {
            sent.push(request);
            return model.stream(request);
          },
        };
  const app = createApp({
    store: () => counting,
    readEnvironment: () => environment,
    log: () => {},
    logLine: () => {},
    clock: () => new Date(Date.now() + offset),
    wrapModel: wrap,
  });
  const notice = (conversation: string, name: string) =>
    app.request(`http://tailgate.test/v1/sessions/${conversation}/inbox`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name, content: 'stop' }),
    });
  /** A conversation `id` (a native session) whose turns its budget limits to `turns`. */
  const budgeted = async (id: string, turns: number) => {
    const created = await app.request('http://tailgate.test/v1/sessions', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, budget: { max_turns: turns } }),
    });
    expect(created.status).toBe(201);
    return id;
  };
  return { openai: clientInProcess(app, TOKEN), store, counting, sent, notice, budgeted };
}

type World = ReturnType<typeof recording>;
const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];
const user = (content: string) => ({ role: 'user' as const, content });
const stray = { type: 'function_call_output', call_id: 'call_none', output: 'x' };
/** More tools than an openai: model takes. */
const tooMany = Array.from({ length: 129 }, (_, index) => ({ ...tools[0]!, name: `tool_${index}` }));

/** A conversation whose newest response called get_weather: its response, history and the answer. */
async function calling({ openai }: World, city: string) {
  const ask = `call get_weather {"city":"${city}"}`;
  const first = await openai.responses.create({ model: 'echo', input: ask, tools });
  const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  const answer = { type: 'function_call_output' as const, call_id: call.call_id, output: '10C' };
  return { first, conversation: first.conversation!.id, answer };
}

/** A streamed attempt of `body` on the unreachable model, which fails. */
async function failsStreamed({ openai }: World, body: object) {
  const request = { ...body, model: 'unreachable', stream: true } as OpenAI.Responses.ResponseCreateParamsStreaming;
  for await (const event of await openai.responses.create(request)) expect(event.type).not.toBe('response.completed');
}

/** A non-streamed attempt of `body` on the unreachable model, which fails. */
async function fails({ openai }: World, body: object) {
  const answer = await openai.responses.create({ ...body, model: 'unreachable' } as never).catch((e: unknown) => e);
  expect((answer as { status?: unknown }).status).not.toBe('completed');
}

/**
 * Queues `content` in conversation `id` as a native enqueue (`on_busy: "enqueue"`) stores it, its
 * pickup left to the next claim: that claim takes it up first, and is then refused as busy.
 */
async function queueNative({ store }: World, id: string, content: string) {
  const input = [{ type: 'message' as const, role: 'user' as const, content }];
  await new SessionLog(store).enqueue(id, { input, request: {}, key_sha256: sha256Hex(content) });
}

type Shape = (world: World) => Promise<object>;

const shapes: Record<string, Shape> = {
  'an output answering the open call, under conversation': async (world) => {
    const { conversation, answer } = await calling(world, 'Oslo');
    return { conversation, input: [answer, user('and now?')], tools };
  },
  'an output answering the open call, under previous_response_id': async (world) => {
    const { first, answer } = await calling(world, 'Bern');
    return { previous_response_id: first.id, input: [answer], tools };
  },
  'a message leaving the call open': async (world) => {
    const { conversation } = await calling(world, 'Rome');
    return { conversation, input: 'never mind', tools };
  },
  'an output answering no open call': async (world) => {
    const { conversation } = await calling(world, 'Riga');
    return { conversation, input: [{ type: 'function_call_output', call_id: 'call_none', output: 'x' }], tools };
  },
  'an output answering a call answered already': async (world) => {
    const { conversation, answer } = await calling(world, 'Kyiv');
    await world.openai.responses.create({ model: 'echo', conversation, input: [answer], tools });
    return { conversation, input: [answer, user('again')], tools };
  },
  'a retry under conversation of a step whose streamed attempt failed': async (world) => {
    const { conversation, answer } = await calling(world, 'Lima');
    const body = { conversation, input: [answer, user('and in Accra?')], tools };
    await failsStreamed(world, body);
    return body;
  },
  'a retry under conversation of a step whose attempt failed': async (world) => {
    const { conversation, answer } = await calling(world, 'Cali');
    const body = { conversation, input: [answer, user('and in Accra?')], tools };
    await fails(world, body);
    return body;
  },
  'another step under conversation after a failed attempt answering the call': async (world) => {
    const { conversation, answer } = await calling(world, 'Baku');
    await failsStreamed(world, { conversation, input: [answer, user('and in Accra?')], tools });
    return { conversation, input: [user('something else')], tools };
  },
  'a step answering the call again after a failed attempt that answered it': async (world) => {
    const { conversation, answer } = await calling(world, 'Doha');
    await failsStreamed(world, { conversation, input: [answer, user('and in Accra?')], tools });
    return { conversation, input: [answer, user('and in Cairo?')], tools };
  },
  'a retry under previous_response_id of a step whose streamed attempt failed': async (world) => {
    const { first, answer } = await calling(world, 'Quito');
    const body = { previous_response_id: first.id, input: [answer, user('and in Accra?')], tools };
    await failsStreamed(world, body);
    return body;
  },
  'a retry under previous_response_id of a step whose attempt failed twice': async (world) => {
    const { first, answer } = await calling(world, 'Suva');
    const body = { previous_response_id: first.id, input: [answer, user('and in Apia?')], tools };
    await failsStreamed(world, body);
    await fails(world, body);
    return body;
  },
  "a loop's step under conversation resending the step before": async (world) => {
    const { id: conversation } = await world.openai.conversations.create({});
    const one = await world.openai.responses.create({ model: 'echo', conversation, input: [user('one')] });
    return {
      conversation,
      input: [user('one'), { role: 'assistant' as const, content: one.output_text }, user('two')],
    };
  },
  "a loop's step under an older previous_response_id resending every item since": async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'the first step' });
    const next = await world.openai.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [user('its second')],
    });
    const input = [user('its second'), { role: 'assistant' as const, content: next.output_text }, user('third')];
    return { previous_response_id: first.id, input };
  },
  'a step under the newest previous_response_id of a conversation with a failed turn': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await fails(world, { previous_response_id: first.id, input: 'two' });
    return { previous_response_id: first.id, input: 'three' };
  },
  'a step with new instructions and without tools, the conversation offering its own': async (world) => {
    const { conversation, answer } = await calling(world, 'Oslo');
    return { conversation, input: [answer], instructions: 'be brief' };
  },
  'a step under previous_response_id with instructions after a failed attempt': async (world) => {
    const { first, answer } = await calling(world, 'Nuuk');
    const body = { previous_response_id: first.id, input: [answer, user('next')], tools, instructions: 'terse' };
    await failsStreamed(world, body);
    return body;
  },
  "a loop's step under conversation resending the step before, which failed": async (world) => {
    const { id: conversation } = await world.openai.conversations.create({});
    const one = await world.openai.responses.create({ model: 'echo', conversation, input: [user('one')] });
    const input = [user('one'), { role: 'assistant' as const, content: one.output_text }, user('two')];
    await failsStreamed(world, { conversation, input });
    return { conversation, input };
  },
  "a loop's step under conversation resending the calls and outputs before": async (world) => {
    const { conversation, answer, first } = await calling(world, 'Pune');
    const call = first.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
    const fn = { type: 'function_call' as const, call_id: call.call_id, name: call.name, arguments: call.arguments };
    const two = await world.openai.responses.create({ model: 'echo', conversation, input: [answer], tools });
    const input = [fn, answer, { role: 'assistant' as const, content: two.output_text }, user('three')];
    return { conversation, input, tools };
  },
  'a tool_choice naming no tool of the conversation, with an output answering no open call': async (world) => {
    const { conversation } = await calling(world, 'Agra');
    const stray = { type: 'function_call_output', call_id: 'call_none', output: 'x' };
    return { conversation, input: [stray], tool_choice: { type: 'function', name: 'nope' } };
  },
  'a tool_choice naming no tool of the conversation, under previous_response_id': async (world) => {
    const { first, answer } = await calling(world, 'Pisa');
    return { previous_response_id: first.id, input: [answer], tool_choice: { type: 'function', name: 'nope' } };
  },
  'a tool_choice naming no tool of the conversation, under a previous_response_id not its newest': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    return { previous_response_id: first.id, input: 'other', tool_choice: { type: 'function', name: 'nope' } };
  },
  'a retry under conversation of the request an abort notice refused': async (world) => {
    const { conversation } = await calling(world, 'Oran');
    expect((await world.notice(conversation, 'abort')).status).toBeLessThan(300);
    const body = { conversation, input: 'go on', tools };
    const aborted = await world.openai.responses.create({ model: 'echo', ...body }).catch((e: unknown) => e);
    expect(aborted).toMatchObject({ status: 409 });
    return body;
  },
  'another request under conversation after an abort notice refused one': async (world) => {
    const { conversation } = await calling(world, 'Fez');
    await world.notice(conversation, 'abort');
    await world.openai.responses.create({ model: 'echo', conversation, input: 'go on', tools }).catch(() => 0);
    return { conversation, input: 'something else', tools };
  },
  'a retry under previous_response_id of the request an abort notice refused': async (world) => {
    const { first, conversation, answer } = await calling(world, 'Tunis');
    await world.notice(conversation, 'abort');
    const body = { previous_response_id: first.id, input: [answer], tools };
    const aborted = await world.openai.responses.create({ model: 'echo', ...body }).catch((e: unknown) => e);
    expect(aborted).toMatchObject({ status: 409 });
    return body;
  },
  'an item_reference to an item of the conversation': async (world) => {
    const { first } = await calling(world, 'Graz');
    const reference = { type: 'item_reference', id: first.output[0]!.id! };
    return { conversation: first.conversation!.id, input: [user('again'), reference], tools };
  },
  'two outputs answering the one open call': async (world) => {
    const { conversation, answer } = await calling(world, 'Lome');
    return { conversation, input: [answer, user('x'), answer], tools };
  },
  'a step under a response in the middle of its conversation (a branch)': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    const second = await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: second.id, input: 'three' });
    return { previous_response_id: second.id, input: 'another three' };
  },
  'a branch off a response that ran with instructions the conversation changed since': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one', instructions: 'be terse' });
    await world.openai.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'two',
      instructions: 'be very verbose and thorough in every answer',
    });
    return { previous_response_id: first.id, input: 'other' };
  },
  'a branch with instructions of its own': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one', instructions: 'be terse' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    return { previous_response_id: first.id, input: 'other', instructions: 'answer in French, briefly' };
  },
  'a branch answering the call of a response whose call the conversation answered since': async (world) => {
    const { first, conversation, answer } = await calling(world, 'Lyon');
    await world.openai.responses.create({ model: 'echo', conversation, input: [answer, user('thanks')], tools });
    return { previous_response_id: first.id, input: [{ ...answer, output: '12C' }], tools };
  },
  'a branch with an output answering no call open at that response': async (world) => {
    const { first, conversation, answer } = await calling(world, 'Gent');
    await world.openai.responses.create({ model: 'echo', conversation, input: [answer], tools });
    const stray = { type: 'function_call_output', call_id: 'call_none', output: 'x' };
    return { previous_response_id: first.id, input: [stray], tools };
  },
  'a branch off a response whose turn packing put in a segment': async (world) => {
    let previous = await world.openai.responses.create({ model: 'echo', input: 'step 1 of a long conversation' });
    const ids = [previous.id];
    for (let step = 2; step <= 6; step++) {
      previous = await world.openai.responses.create({
        model: 'echo',
        previous_response_id: previous.id,
        input: `step ${step} of a long conversation`,
      });
      ids.push(previous.id);
    }
    const packed = await new SessionLog(world.store, { keepRecords: 1, packMinRecords: 1 }).pack(
      previous.conversation!.id,
    );
    expect(packed.through).toBeGreaterThanOrEqual(3);
    return { previous_response_id: ids[2], input: 'a branch off step 3' };
  },
  "a loop's later step in the branch its first step made": async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    const step = await world.openai.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: [user('branch step 1')],
    });
    expect(step.conversation!.id).not.toBe(first.conversation!.id);
    const input = [user('branch step 1'), { role: 'assistant' as const, content: step.output_text }, user('step 2')];
    return { previous_response_id: first.id, input };
  },
  "a branch off a branch's response, not its newest": async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    const branched = await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'b' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: branched.id, input: 'b2' });
    return { previous_response_id: branched.id, input: 'b again' };
  },
  'a step under conversation while a native input waits queued, its pickup not yet done': async (world) => {
    const { conversation } = await calling(world, 'Bonn');
    await queueNative(world, conversation, 'queued first');
    return { conversation, input: 'and now?', tools };
  },
  'a step under the newest previous_response_id while a native input waits queued': async (world) => {
    const { first } = await calling(world, 'Sana');
    await queueNative(world, first.conversation!.id, 'queued first');
    return { previous_response_id: first.id, input: 'and now?', tools };
  },
  'an item sent back with the id of one the conversation holds, under previous_response_id': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    return { previous_response_id: first.id, input: [first.output[0], user('again')] };
  },
  'an item sent back with the id of one the conversation holds, under conversation': async (world) => {
    const { id: conversation } = await world.openai.conversations.create({});
    const one = await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    return { conversation, input: [user('again'), one.output[0]] };
  },
  'an item sent back with the id of one the branch holds, under an older previous_response_id': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    return { previous_response_id: first.id, input: [first.output[0], user('again')] };
  },
  'an item sent back with the id of one held, and an output answering no open call': async (world) => {
    const { conversation, first } = await calling(world, 'Oulu');
    return { conversation, input: [stray, first.output[0]], tools };
  },
  'an item sent back with the id of one held, and a tool_choice naming no tool': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    const input = [first.output[0], user('again')];
    return { previous_response_id: first.id, input, tool_choice: { type: 'function', name: 'nope' } };
  },
  'an item sent back with the id of one held, while a native input waits queued': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await queueNative(world, first.conversation!.id, 'queued first');
    return { previous_response_id: first.id, input: [first.output[0], user('again')] };
  },
  'a conversation whose budget is spent, under conversation': async (world) => {
    const conversation = await world.budgeted('spent-under-conversation', 1);
    await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    return { conversation, input: 'two' };
  },
  'a conversation whose budget is spent, under previous_response_id': async (world) => {
    const conversation = await world.budgeted('spent-under-response', 1);
    const first = await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    return { previous_response_id: first.id, input: 'two' };
  },
  'a branch off a conversation whose budget is spent': async (world) => {
    const conversation = await world.budgeted('spent-branch', 2);
    const first = await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    await world.openai.responses.create({ model: 'echo', conversation, input: 'two' });
    return { previous_response_id: first.id, input: 'other' };
  },
  'a conversation whose budget is spent, with an output answering no open call': async (world) => {
    const conversation = await world.budgeted('spent-stray', 1);
    await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    return { conversation, input: [stray] };
  },
  'a conversation whose budget is spent, with an item sent back with the id of one held': async (world) => {
    const conversation = await world.budgeted('spent-held', 1);
    const first = await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    return { previous_response_id: first.id, input: [first.output[0], user('again')] };
  },
  'a conversation whose budget is spent, with a tool_choice naming no tool': async (world) => {
    const conversation = await world.budgeted('spent-choice', 1);
    const first = await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    return { previous_response_id: first.id, input: 'two', tool_choice: { type: 'function', name: 'nope' } };
  },
  'a conversation whose budget is spent, while a native input waits queued': async (world) => {
    const conversation = await world.budgeted('spent-queued', 1);
    const first = await world.openai.responses.create({ model: 'echo', conversation, input: 'one' });
    await queueNative(world, conversation, 'queued first');
    return { previous_response_id: first.id, input: 'two' };
  },
  'more tools than an openai: model takes, with an output answering no open call': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    return { previous_response_id: first.id, input: [stray], model: 'openai:gpt-4o', tools: tooMany };
  },
  'more tools than an openai: model takes, under an older previous_response_id': async (world) => {
    const first = await world.openai.responses.create({ model: 'echo', input: 'one' });
    await world.openai.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    return { previous_response_id: first.id, input: [stray], model: 'openai:gpt-4o', tools: tooMany };
  },
  'two failed attempts under conversation, the second of another step': async (world) => {
    const { conversation, answer } = await calling(world, 'Male');
    await failsStreamed(world, { conversation, input: [answer, user('x')], tools });
    await failsStreamed(world, { conversation, input: [user('y')], tools });
    return { conversation, input: [answer, user('x')], tools };
  },
};

describe('responses.inputTokens.count then responses.create of the same body', () => {
  it.each(Object.keys(shapes))('%s: counts the prompt the create sends, or is refused as it is', async (name) => {
    const world = recording();
    const body = { model: 'echo', ...(await shapes[name]!(world)) };
    await expectCountIsCreate(world, body);
  });

  it('a conversation whose newest turn is dead: counts the prompt the create sends', async () => {
    const { store, body } = await deadSecondStep();
    await expectCountIsCreate(recording(store, 3 * HOUR), { model: 'echo', ...body }, true);
  });

  it('a next step while the dead turn before it holds its lease: refused as the create is', async () => {
    const { store, body } = await deadSecondStep();
    await expectCountIsCreate(recording(store, HOUR + 1000), { model: 'echo', ...body, input: 'step 3' });
  });

  it('a next step under previous_response_id while a dead turn after it holds its lease', async () => {
    const { store, body, first } = await deadSecondStep();
    const step = { model: 'echo', previous_response_id: first, input: body.input };
    await expectCountIsCreate(recording(store, HOUR + 1000), step);
  });

  it('a tool_choice naming no tool under previous_response_id while a dead turn after it holds its lease', async () => {
    const { store, first } = await deadSecondStep();
    const step = {
      model: 'echo',
      previous_response_id: first,
      input: 'x',
      tool_choice: { type: 'function', name: 'no' },
    };
    await expectCountIsCreate(recording(store, HOUR + 1000), step);
  });

  it('a retry under previous_response_id of a step whose turn died, its lease run out', async () => {
    const { store, body, first } = await deadSecondStep();
    const step = { model: 'echo', previous_response_id: first, input: body.input };
    await expectCountIsCreate(recording(store, 3 * HOUR), step, true);
  });

  it('a retry under an older previous_response_id after its dead turn, its lease run out', async () => {
    // A loop under a fixed previous_response_id: its third step resends the second's items, and dies.
    const store = new MemoryStore();
    const { openai } = recording(store);
    const first = await openai.responses.create({ model: 'echo', input: 'one', instructions: 'be terse' });
    const second = await openai.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: 'two',
      instructions: 'be very verbose and thorough in every answer you give to anyone',
    });
    const step = {
      model: 'echo',
      previous_response_id: first.id,
      input: [user('two'), { role: 'assistant' as const, content: second.output_text }, user('three')],
    };
    await diesSending(store, HOUR, step);
    // Its retry goes on after the failed attempt (its items taken), not in a branch off the first response.
    await expectCountIsCreate(recording(store, 3 * HOUR), step, true);
  });

  it.each(['conversation', 'previous_response_id'] as const)(
    'a next step under %s while a streamed turn holds its lease: refused as the create is',
    async (how) => {
      const store = new MemoryStore();
      const first = await recording(store).openai.responses.create({ model: 'echo', input: 'one' });
      const conversation = first.conversation!.id;
      await diesSending(store, HOUR, { conversation, input: 'two', stream: true });
      const on = how === 'conversation' ? { conversation } : { previous_response_id: first.id };
      await expectCountIsCreate(recording(store, HOUR + 1000), { model: 'echo', ...on, input: 'three' });
    },
  );

  it('an output answering no open call while a streamed turn holds its lease: the 400, as the create', async () => {
    const store = new MemoryStore();
    const first = await recording(store).openai.responses.create({ model: 'echo', input: 'one' });
    const conversation = first.conversation!.id;
    await diesSending(store, HOUR, { conversation, input: 'two', stream: true });
    const stray = { type: 'function_call_output', call_id: 'call_none', output: 'x' };
    await expectCountIsCreate(recording(store, HOUR + 1000), { model: 'echo', conversation, input: [stray] });
  });

  it('a step whose dead turn answered its calls, its lease running: refused as the create is', async () => {
    const { store, body } = await answeringCall();
    await diesSending(store, HOUR, body);
    await expectCountIsCreate(recording(store, HOUR + 1000), { model: 'echo', ...body });
  });

  it('a step whose dead turn answered its calls, its lease run out: counts the prompt the create sends', async () => {
    const { store, body } = await answeringCall();
    await diesSending(store, HOUR, body);
    await expectCountIsCreate(recording(store, 3 * HOUR), { model: 'echo', ...body }, true);
  });
});

/**
 * Counts `body`, then creates it: the count is the tokens of the prompt the create sent its model,
 * or both are refused alike. The count writes nothing, but for `takesOutDead`: a dead response it
 * meets as the conversation's newest is taken out first, as by any request (docs/OPENAI.md).
 */
async function expectCountIsCreate(world: World, body: object, takesOutDead = false) {
  const { openai, counting, sent } = world;
  counting.reset();
  const counted = await openai.responses.inputTokens
    .count(body as never)
    .then((answer) => answer.input_tokens)
    .catch((error: unknown) => error);
  const writes = { put: counting.counts.put, delete: counting.counts.delete };
  if (takesOutDead) expect(writes.delete).toBeGreaterThan(0);
  else expect(writes).toEqual({ put: 0, delete: 0 });
  const calls = sent.length;
  const created = await openai.responses.create(body as never).catch((error: unknown) => error);
  if (created instanceof OpenAI.APIError) {
    const { status, code, param, message } = created;
    expect(counted).toMatchObject({ status, code, param, message });
    return;
  }
  expect((created as OpenAI.Responses.Response).status).toBe('completed');
  expect(sent.length).toBe(calls + 1);
  const request = sent.at(-1)!;
  expect(counted).toBe(countPromptTokens(request.prompt, request.tools, tokenCounterFor('echo')));
}
