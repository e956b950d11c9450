import { createHash } from 'node:crypto';
import { createOpenAI } from '@ai-sdk/openai';
import { Agent, OpenAIProvider, Runner, tool as agentTool } from '@openai/agents';
import { generateText, stepCountIs, tool } from 'ai';
import OpenAI from 'openai';
import { ResponsesToolRunner } from 'openai/helpers/responses-tool-runner';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { MemoryStore } from '../../lib/store/memory.ts';
import { startTailgate, tailgateGet, TOKEN } from './server.ts';
import { agentsTracingOff } from './agents-tracing.ts';

// A client's tool loop that resends the whole history on each step, without
// previous_response_id, stays one conversation (lib/openai/history-index.ts).
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
/** Reads of the history index since the last reset. */
let indexReads = 0;

agentsTracingOff();
beforeAll(async () => {
  tailgate = await startTailgate({ MODEL_ALIASES: 'gpt-4.1-mini=echo' });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
  const get = tailgate.store.get.bind(tailgate.store);
  tailgate.store.get = (key, options) => {
    if (key.startsWith('openai/history/')) indexReads += 1;
    return get(key, options);
  };
});
afterAll(() => tailgate.close());
beforeEach(() => {
  indexReads = 0;
});

/** The sessions created since `before` (ids), and the items of each. */
async function sessionsSince(before: Set<string>): Promise<{ id: string; items: any[] }[]> {
  const listed = await tailgateGet(tailgate.baseURL, '/sessions?limit=100');
  const fresh = listed.sessions.map((row: { id: string }) => row.id).filter((id: string) => !before.has(id));
  return Promise.all(
    fresh.map(async (id: string) => ({
      id,
      items: await itemsOf(id),
    })),
  );
}

/** The items of session `id`, oldest first. */
async function itemsOf(id: string): Promise<any[]> {
  return (await tailgateGet(tailgate.baseURL, `/sessions/${id}/items?limit=100`)).items.reverse();
}

/** The contents of session `id`'s items, oldest first. */
async function contentsOf(id: string): Promise<unknown[]> {
  return (await itemsOf(id)).map((item: { content: string }) => item.content);
}

async function sessionIds(): Promise<Set<string>> {
  const listed = await tailgateGet(tailgate.baseURL, '/sessions?limit=100');
  return new Set(listed.sessions.map((row: { id: string }) => row.id));
}

const shapeOf = (items: any[]) =>
  items.map((item) => [item.type, item.role ?? null, item.content ?? item.arguments ?? item.output]);

describe('a client tool loop is one conversation', () => {
  it("the AI SDK's generateText with a tool: one session, every step's items once, in order", async () => {
    const before = await sessionIds();
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const result = await generateText({
      model: openai('gpt-4.1-mini'),
      system: 'Be brief.',
      prompt: 'call get_weather {"city":"Paris"}',
      tools: {
        get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '18C, clear' }),
      },
      stopWhen: stepCountIs(4),
    });
    expect(result.steps).toHaveLength(2);
    const sessions = await sessionsSince(before);
    expect(sessions).toHaveLength(1);
    expect(shapeOf(sessions[0]!.items)).toEqual([
      ['message', 'user', 'call get_weather {"city":"Paris"}'],
      ['function_call', null, '{"city":"Paris"}'],
      ['function_call_output', null, '18C, clear'],
      ['message', 'assistant', 'echo: call get_weather {"city":"Paris"}'],
    ]);
    expect(result.steps[1]!.response.id).toMatch(new RegExp(`^resp_${sessions[0]!.id}_2_`));
    // One index read for the second step (the first has no model output to match).
    expect(indexReads).toBe(1);
  });

  it("a step's input_items are its whole input as the loop sent it, not only the items it added", async () => {
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL });
    const result = await generateText({
      model: openai('gpt-4.1-mini'),
      prompt: 'call get_weather {"city":"Lima"}',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '20C' }) },
      stopWhen: stepCountIs(4),
    });
    const second = result.steps[1]!.response.id;
    const sessionId = /^resp_(conv_[0-9a-f]{24})_/.exec(second)![1]!;
    const listed = await client.responses.inputItems.list(second, { order: 'asc' });
    expect(listed.data.map((item) => item.id)).toEqual(
      [1, 2, 3].map((seq) => expect.stringMatching(`_${sessionId}_${seq}$`)),
    );
    expect(listed.data.map((item) => item.type)).toEqual(['message', 'function_call', 'function_call_output']);

    // A loop of the official client: every step's input, paged by any limit, both ways.
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: 'user', content: 'one' }];
    let response = await client.responses.create({ model: 'echo', input });
    for (const next of ['two', 'three']) {
      input.push(...(response.output as OpenAI.Responses.ResponseInputItem[]), { role: 'user', content: next });
      response = await client.responses.create({ model: 'echo', input });
    }
    const texts = ['one', 'echo: one', 'two', 'echo: two', 'three'];
    const textOf = (item: OpenAI.Responses.ResponseItem) =>
      item.type === 'message' ? (item.content[0] as { text: string }).text : item.type;
    for (const limit of [1, 2, 20]) {
      const ascending: OpenAI.Responses.ResponseItem[] = [];
      for await (const item of client.responses.inputItems.list(response.id, { order: 'asc', limit }))
        ascending.push(item);
      expect(ascending.map(textOf), `limit ${limit}`).toEqual(texts);
      const descending: OpenAI.Responses.ResponseItem[] = [];
      for await (const item of client.responses.inputItems.list(response.id, { limit })) descending.push(item);
      expect(descending.map(textOf), `limit ${limit}`).toEqual([...texts].reverse());
    }
  });

  it('@openai/agents run() with a tool: one session', async () => {
    const before = await sessionIds();
    const runner = new Runner({
      modelProvider: new OpenAIProvider({ openAIClient: client, useResponses: true }),
      tracingDisabled: true,
    });
    const getWeather = agentTool({
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async () => '18C',
    });
    const agent = new Agent({ name: 'weather', instructions: 'Be brief.', model: 'echo', tools: [getWeather] });
    const result = await runner.run(agent, 'call get_weather {"city":"Rome"}');
    expect(result.finalOutput).toBe('echo: call get_weather {"city":"Rome"}');
    const sessions = await sessionsSince(before);
    expect(sessions).toHaveLength(1);
    expect(shapeOf(sessions[0]!.items).map(([type]) => type)).toEqual([
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);
  });

  it.each([false, true])("the openai client's ResponsesToolRunner (stream: %s): one session", async (stream) => {
    const before = await sessionIds();
    const runner = new ResponsesToolRunner({
      functions: [
        {
          tool: { type: 'function', name: 'get_weather', strict: false, parameters: { type: 'object' } },
          execute: async () => '18C',
        },
      ],
    });
    const prompt = `call get_weather {"city":"${stream ? 'Oslo' : 'Bergen'}"}`;
    const response = await runner.run(client, { model: 'echo', input: prompt }, { stream });
    expect(response.output_text).toBe(`echo: ${prompt}`);
    const sessions = await sessionsSince(before);
    expect(sessions).toHaveLength(1);
    expect(shapeOf(sessions[0]!.items).map(([type]) => type)).toEqual([
      'message',
      'function_call',
      'function_call_output',
      'message',
    ]);
  });

  it("the AI SDK's loop with an Idempotency-Key per request body: one session, a retried step replayed", async () => {
    const before = await sessionIds();
    const sent: string[] = [];
    // The call's `headers` go with every step (the second would be 422 idempotency_key_reused):
    // a key made of the run and the body tells the steps apart and gives a retry its step's key.
    const keyed = async (url: RequestInfo | URL, init?: RequestInit) => {
      const body = String(init?.body);
      sent.push(body);
      const key = `run-7-${createHash('sha256').update(body).digest('hex')}`;
      return fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), 'idempotency-key': key } });
    };
    const openai = createOpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, fetch: keyed });
    const loop = {
      model: openai('echo'),
      prompt: 'call get_weather {"city":"Turku"}',
      tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }), execute: async () => '18C' }) },
      stopWhen: stepCountIs(4),
    };
    const result = await generateText(loop);
    expect(result.steps).toHaveLength(2);
    // The second step sent again (a retry after its answer was lost) is answered as it was.
    const retried = await keyed(`${tailgate.baseURL}/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: sent[1]!,
    });
    expect(((await retried.json()) as { id: string }).id).toBe(result.steps[1]!.response.id);
    const sessions = await sessionsSince(before);
    expect(sessions).toHaveLength(1);
    expect(sessions[0]!.items).toHaveLength(4);
  });

  it('an input that edits the history, or resends an older one, starts a new conversation', async () => {
    const first = await client.responses.create({
      model: 'echo',
      input: 'call get_weather {"city":"Oslo"}',
      tools: [{ type: 'function', name: 'get_weather', strict: false, parameters: { type: 'object' } }],
    });
    const call = first.output[0] as { call_id: string; name: string; arguments: string };
    const history = [
      { role: 'user' as const, content: 'call get_weather {"city":"Oslo"}' },
      { type: 'function_call' as const, call_id: call.call_id, name: call.name, arguments: call.arguments },
    ];
    const answer = { type: 'function_call_output' as const, call_id: call.call_id, output: '-2C' };
    const edited = await client.responses.create({
      model: 'echo',
      input: [{ role: 'user', content: 'call get_weather {"city":"Bergen"}' }, history[1]!, answer],
    });
    expect(edited.conversation!.id).not.toBe(first.conversation!.id);
    const continued = await client.responses.create({ model: 'echo', input: [...history, answer] });
    expect(continued.conversation!.id).toBe(first.conversation!.id);
    // The same history again: the conversation has moved on, so it is not continued.
    const again = await client.responses.create({ model: 'echo', input: [...history, answer] });
    expect(again.conversation!.id).not.toBe(first.conversation!.id);
  });

  it('a keyed resend of a history its conversation moved past is a new conversation; its retry replays', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'ping' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'pong' });
    const input = [
      { role: 'user' as const, content: 'ping' },
      { role: 'assistant' as const, content: 'echo: ping' },
      { role: 'user' as const, content: 'other' },
    ];
    // A step re-run from an earlier point, under a key that took no turn yet.
    const keyed = { headers: { 'Idempotency-Key': `rerun-${first.id}` } };
    const rerun = await client.responses.create({ model: 'echo', input }, keyed);
    expect(rerun.conversation!.id).not.toBe(first.conversation!.id);
    expect(rerun.output_text).toBe('echo: other');
    expect((await client.responses.create({ model: 'echo', input }, keyed)).id).toBe(rerun.id);
  });

  it('a resent history does not continue a conversation that got items after it the client does not hold', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'hello' });
    await client.conversations.items.create(first.conversation!.id, {
      items: [{ type: 'message', role: 'user', content: 'an aside the client never saw' }],
    });
    const resent = await client.responses.create({
      model: 'echo',
      input: [
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: 'echo: hello' },
        { role: 'user', content: 'next' },
      ],
    });
    expect(resent.conversation!.id).not.toBe(first.conversation!.id);
    expect(await contentsOf(resent.conversation!.id)).toEqual(['hello', 'echo: hello', 'next', 'echo: next']);
  });

  it('a keyed retry of a step that continued a conversation is replayed, not taken again', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'ping' });
    const input = [
      { role: 'user' as const, content: 'ping' },
      { role: 'assistant' as const, content: 'echo: ping' },
      { role: 'user' as const, content: 'pong' },
    ];
    const keyed = { headers: { 'Idempotency-Key': `loop-${first.id}` } };
    const step = await client.responses.create({ model: 'echo', input }, keyed);
    const retried = await client.responses.create({ model: 'echo', input }, keyed);
    expect(step.conversation!.id).toBe(first.conversation!.id);
    expect(retried.id).toBe(step.id);
    expect(await contentsOf(first.conversation!.id)).toEqual(['ping', 'echo: ping', 'pong', 'echo: pong']);
  });

  it('keys the history index with TOKEN_SIGNING_KEY or a fixed key, never with API_TOKEN', async () => {
    // Two deployments on one bucket without a signing key, with other API_TOKENs: the entry
    // one wrote is the one the other finds (a bucket reader could not test guesses of either).
    const store = new MemoryStore();
    const [first, second] = await Promise.all(
      ['token-one', 'token-two'].map((token) =>
        startTailgate({ API_TOKEN: token, TOKEN_SIGNING_KEY: '', MODEL_ALIASES: 'gpt-4.1-mini=echo' }, store),
      ),
    );
    try {
      const one = new OpenAI({ apiKey: 'token-one', baseURL: first!.baseURL, maxRetries: 0 });
      const two = new OpenAI({ apiKey: 'token-two', baseURL: second!.baseURL, maxRetries: 0 });
      const started = await one.responses.create({ model: 'echo', input: 'ping' });
      const input = [
        { role: 'user' as const, content: 'ping' },
        { role: 'assistant' as const, content: 'echo: ping' },
        { role: 'user' as const, content: 'pong' },
      ];
      const continued = await two.responses.create({ model: 'echo', input });
      expect(continued.conversation!.id).toBe(started.conversation!.id);
    } finally {
      await Promise.all([first!.close(), second!.close()]);
    }
  });

  it('a scoped token only reaches the sessions it may use', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'hello' });
    const sessionId = first.conversation!.id;
    const input = [
      { role: 'user' as const, content: 'hello' },
      { role: 'assistant' as const, content: 'echo: hello' },
      { role: 'user' as const, content: 'again' },
    ];
    const mint = async (bound: string) => {
      const response = await fetch(`${tailgate.baseURL}/tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ scopes: ['session:turn'], session_id: bound }),
      });
      return ((await response.json()) as { token: string }).token;
    };
    const other = await client.conversations.create({});
    const stranger = new OpenAI({ apiKey: await mint(other.id), baseURL: tailgate.baseURL, maxRetries: 0 });
    const refused = await stranger.responses.create({ model: 'echo', input }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const owner = new OpenAI({ apiKey: await mint(sessionId), baseURL: tailgate.baseURL, maxRetries: 0 });
    const continued = await owner.responses.create({ model: 'echo', input });
    expect(continued.conversation!.id).toBe(sessionId);
    expect(continued.output_text).toBe('echo: again');
  });

  it("two loops whose first exchange is the same: each loop's next step continues its own conversation", async () => {
    // Two users of one app open with the same message and get the same answer (a deterministic
    // model); each loop sends its own metadata (or safety_identifier) on every step.
    const history = [
      { role: 'user' as const, content: 'hi there' },
      { role: 'assistant' as const, content: 'echo: hi there' },
    ];
    const alice = { metadata: { user: 'alice' } };
    const bob = { metadata: { user: 'bob' } };
    const aliceFirst = await client.responses.create({ model: 'echo', input: 'hi there', ...alice });
    const bobFirst = await client.responses.create({ model: 'echo', input: 'hi there', ...bob });
    const aliceNext = await client.responses.create({
      model: 'echo',
      input: [...history, { role: 'user', content: 'my card number is 4111' }],
      ...alice,
    });
    const bobNext = await client.responses.create({
      model: 'echo',
      input: [...history, { role: 'user', content: 'and mine?' }],
      ...bob,
    });
    expect([aliceNext.conversation!.id, bobNext.conversation!.id]).toEqual([
      aliceFirst.conversation!.id,
      bobFirst.conversation!.id,
    ]);
    const bobItems = await tailgateGet(tailgate.baseURL, `/sessions/${bobFirst.conversation!.id}/items?limit=100`);
    expect(JSON.stringify(bobItems)).not.toContain('4111');
  });

  it('two live conversations with the same history in the same fields: a resend continues neither', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'hello twin' });
    const second = await client.responses.create({ model: 'echo', input: 'hello twin' });
    const resent = await client.responses.create({
      model: 'echo',
      input: [
        { role: 'user', content: 'hello twin' },
        { role: 'assistant', content: 'echo: hello twin' },
        { role: 'user', content: 'whose am I?' },
      ],
    });
    expect([first.conversation!.id, second.conversation!.id]).not.toContain(resent.conversation!.id);
    expect(await contentsOf(resent.conversation!.id)).toEqual([
      'hello twin',
      'echo: hello twin',
      'whose am I?',
      'echo: whose am I?',
    ]);
  });

  it('a step that changes a field of the loop (here safety_identifier) starts a new conversation', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'scoped', safety_identifier: 'u-1' });
    const input = [
      { role: 'user' as const, content: 'scoped' },
      { role: 'assistant' as const, content: 'echo: scoped' },
      { role: 'user' as const, content: 'next' },
    ];
    const other = await client.responses.create({ model: 'echo', input, safety_identifier: 'u-2' });
    expect(other.conversation!.id).not.toBe(first.conversation!.id);
    const same = await client.responses.create({ model: 'echo', input, safety_identifier: 'u-1' });
    expect(same.conversation!.id).toBe(first.conversation!.id);
  });

  it('a step with other instructions (a handoff to another agent) continues its conversation', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'triage this', instructions: 'Triage.' });
    const next = await client.responses.create({
      model: 'echo',
      instructions: 'You are the billing agent.',
      input: [
        { role: 'user', content: 'triage this' },
        { role: 'assistant', content: 'echo: triage this' },
        { role: 'user', content: 'billing question' },
      ],
    });
    expect(next.conversation!.id).toBe(first.conversation!.id);
  });

  it('two budgeted tokens reaching the same history: each token continues its own conversation', async () => {
    const mint = async () => {
      const response = await fetch(`${tailgate.baseURL}/tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ scopes: ['session:turn'], budget: { max_turns: 10 } }),
      });
      return ((await response.json()) as { token: string }).token;
    };
    const [one, two] = await Promise.all(
      [mint(), mint()].map(
        async (token) => new OpenAI({ apiKey: await token, baseURL: tailgate.baseURL, maxRetries: 0 }),
      ),
    );
    const firsts = [
      await one!.responses.create({ model: 'echo', input: 'same start' }),
      await two!.responses.create({ model: 'echo', input: 'same start' }),
    ];
    const input = [
      { role: 'user' as const, content: 'same start' },
      { role: 'assistant' as const, content: 'echo: same start' },
      { role: 'user' as const, content: 'next' },
    ];
    const nexts = [
      await one!.responses.create({ model: 'echo', input }),
      await two!.responses.create({ model: 'echo', input }),
    ];
    expect(nexts.map((next) => next.conversation!.id)).toEqual(firsts.map((first) => first.conversation!.id));
  });
});
