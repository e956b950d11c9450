import type OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { heldBodyBytes } from '../../functions/body-budget.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore, type StoreCall } from '../support/faulty-store.ts';
import { clientInProcess, TOKEN } from './server.ts';

// A step whose process died mid-turn, retried by a process that dies in turn while it takes that
// dead turn out (after the delete's fence landed, before its commit): once the fence's lease ran
// out, the dead turn stays, and a retry goes on after it (docs/OPENAI.md), its outputs not stored
// again, never a 400 for the calls that turn answered.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const HOUR = 3_600_000;

/**
 * A process on `store` whose clock is `offset` ms ahead, its store refusing the calls `fails`
 * names; `dying`: it dies once its model is called (`died`), its store refusing everything from
 * then on and its call never answering until `kill` ends it (as the kill ends the process).
 */
function processOf(
  store: MemoryStore,
  offset: number,
  fails: (call: StoreCall) => boolean = () => false,
  dying = false,
) {
  let die = () => {};
  let dead = false;
  let killed = false;
  const died = new Promise<void>((resolve) => (die = resolve));
  const ends = new Set<() => void>();
  /** Never answers: its call ends only when aborted, or once the process is killed. */
  const hang = (request: ModelRequest) =>
    new Promise<never>((_, reject) => {
      const end = () => reject(new Error('the process was killed'));
      if (killed) return end();
      ends.add(end);
      request.signal?.addEventListener('abort', () => reject(new Error('aborted')));
    });
  const model: Model = dying
    ? {
        ...echoModel,
        generate: (request) => {
          dead = true;
          die();
          return hang(request);
        },
      }
    : echoModel;
  const app = createApp({
    store: () => new FaultyStore(store).failWhen((call) => dead || fails(call)),
    readEnvironment: () => environment,
    log: () => {},
    logLine: () => {},
    clock: () => new Date(Date.now() + offset),
    wrapModel: () => model,
    afterResponse: () => {},
  });
  const kill = () => {
    killed = true;
    for (const end of ends) end();
  };
  return { openai: clientInProcess(app, TOKEN), died, kill };
}

/** The dying processes of the test running, killed after it (their requests answered then). */
const dying: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  await Promise.all(dying.splice(0).map((kill) => kill()));
  // No request of the test is left in the app (its body would count in the next file's budget).
  expect(heldBodyBytes()).toBe(0);
});

/** Sends `body` from a process that dies during its turn, once it died (or was answered). */
async function dies(store: MemoryStore, offset: number, body: object, options: object = {}): Promise<void> {
  const dead = processOf(store, offset, () => false, true);
  const sent = dead.openai.responses.create(body as never, options).catch(() => undefined);
  dying.push(async () => {
    dead.kill();
    await sent;
  });
  await Promise.race([dead.died, sent]);
}

const texts = async (openai: OpenAI, id: string) =>
  (await openai.conversations.items.list(id, { order: 'asc', limit: 100 })).data.map((item) =>
    item.type === 'message'
      ? `${item.role}: ${item.content.map((part) => ('text' in part ? part.text : '')).join('')}`
      : item.type,
  );

const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];

it.each(['conversation', 'previous_response_id'] as const)(
  'an unkeyed step under %s answering a call, whose dead turn a retry began taking out and died, goes on once',
  async (under) => {
    const store = new MemoryStore();
    const { openai } = processOf(store, 0);
    const { id: conversation } = await openai.conversations.create({});
    const first = await openai.responses.create({ input: 'call get_weather {"city":"x"}', conversation, tools });
    const callId = first.output.find((item) => item.type === 'function_call')!.call_id;
    const input = [{ type: 'function_call_output' as const, call_id: callId, output: '18C' }];
    const body = {
      input,
      tools,
      ...(under === 'conversation' ? { conversation } : { previous_response_id: first.id }),
    };
    await dies(store, HOUR, body);
    // A retry once its lease ran out: it closes the dead turn and lands the fence of its take-out,
    // then dies (every call after that fence put fails).
    let closed = false;
    let fenced = false;
    const cut = processOf(store, 2 * HOUR, ({ operation, key }) => {
      if (fenced) return true;
      if (operation === 'put' && key.endsWith('.done')) closed = true;
      else if (operation === 'put' && closed && /\/turn\/[^/]+\/\d+$/.test(key)) fenced = true;
      return false;
    });
    const broken = await cut.openai.responses.create(body).catch((error: unknown) => error);
    expect(fenced).toBe(true);
    expect(broken).toMatchObject({ status: 503 });
    // Once the fence's lease ran out too: the dead turn stays, and the retry goes on after it.
    const retry = await processOf(store, 3 * HOUR)
      .openai.responses.create(body)
      .catch((error: unknown) => error);
    expect(retry).toMatchObject({ status: 'completed', conversation: { id: conversation } });
    expect(await texts(processOf(store, 3 * HOUR).openai, conversation)).toEqual([
      'user: call get_weather {"city":"x"}',
      'function_call',
      'function_call_output',
      'assistant: echo: call get_weather {"city":"x"}',
    ]);
  },
);

it('a keyed step whose dead turn a retry began taking out, then died, is answered as that turn ended', async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id: conversation } = await openai.conversations.create({});
  const first = await openai.responses.create({ input: 'call get_weather {"city":"x"}', conversation, tools });
  const callId = first.output.find((item) => item.type === 'function_call')!.call_id;
  const body = {
    input: [{ type: 'function_call_output' as const, call_id: callId, output: '18C' }],
    conversation,
    tools,
  };
  const options = { headers: { 'Idempotency-Key': 'cut-step' } };
  await dies(store, HOUR, body, options);
  let closed = false;
  let fenced = false;
  const cut = processOf(store, 2 * HOUR, ({ operation, key }) => {
    if (fenced) return true;
    if (operation === 'put' && key.endsWith('.done')) closed = true;
    else if (operation === 'put' && closed && /\/turn\/[^/]+\/\d+$/.test(key)) fenced = true;
    return false;
  });
  await cut.openai.responses.create(body, options).catch((error: unknown) => error);
  expect(fenced).toBe(true);
  const retry = await processOf(store, 3 * HOUR)
    .openai.responses.create(body, options)
    .catch((error: unknown) => error);
  // As docs/OPENAI.md says: 409 lease_expired, its input stored once.
  expect(retry).toMatchObject({ status: 409, code: 'lease_expired' });
  expect(await texts(processOf(store, 3 * HOUR).openai, conversation)).toEqual([
    'user: call get_weather {"city":"x"}',
    'function_call',
    'function_call_output',
  ]);
});
