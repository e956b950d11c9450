import type OpenAI from 'openai';
import { afterEach, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { heldBodyBytes } from '../../functions/body-budget.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { clientInProcess, TOKEN } from './server.ts';

// A conversation used through both APIs: a response answered at its end dies mid-turn (a kill -9)
// while a native input waits queued behind it. Once the dead turn's lease ran out, the pickup of
// that input takes the session; the `openai` client's retry of the response then must not store
// its input a second time, whichever closed the dead turn and however the retry is sent.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const HOUR = 3_600_000;

/**
 * A process on `store` whose clock is `offset` ms ahead; `dying`: it dies once its model is called
 * (`died`), its store refusing everything from then on and its call never answering until `kill`
 * ends it (as the kill ends the process). `drain` awaits the work its answers left.
 */
function processOf(store: MemoryStore, offset: number, dying = false) {
  let dead = false;
  let killed = false;
  let die = () => {};
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
  const model: Model = !dying
    ? echoModel
    : {
        ...echoModel,
        generate: (request) => {
          dead = true;
          die();
          return hang(request);
        },
      };
  const tasks: Promise<unknown>[] = [];
  const app = createApp({
    store: () => new FaultyStore(store).failWhen(() => dead),
    readEnvironment: () => environment,
    log: () => {},
    logLine: () => {},
    clock: () => new Date(Date.now() + offset),
    wrapModel: () => model,
    afterResponse: (task) => void tasks.push(task),
  });
  const native = async (method: string, path: string, body?: object) => {
    const response = await app.request(`http://tailgate.test${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: await response.text() };
  };
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  const kill = () => {
    killed = true;
    for (const end of ends) end();
  };
  return { openai: clientInProcess(app, TOKEN), native, died, drain, kill };
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
  const dead = processOf(store, offset, true);
  const sent = dead.openai.responses.create(body as never, options).catch(() => undefined);
  dying.push(async () => {
    dead.kill();
    await sent;
    await dead.drain();
  });
  await Promise.race([dead.died, sent]);
}

const texts = async (openai: OpenAI, id: string) =>
  (await openai.conversations.items.list(id, { order: 'asc', limit: 100 })).data.map((item) =>
    item.type === 'message'
      ? `${item.role}: ${item.content.map((part) => ('text' in part ? part.text : '')).join('')}`
      : item.type,
  );

/** What closes the dead turn before the retry: the pickup's own claim, or a reader of its events. */
const closers = {
  'the pickup of a listing': async (native: ReturnType<typeof processOf>['native'], id: string) =>
    native('GET', `/v1/sessions/${id}/queue`),
  "a reader of the dead turn's events": async (native: ReturnType<typeof processOf>['native'], id: string) =>
    native('GET', `/v1/sessions/${id}/turns/2/events`),
};

const cases: [keyof typeof closers, 'unkeyed' | 'keyed'][] = [];
for (const closer of Object.keys(closers) as (keyof typeof closers)[])
  for (const sent of ['unkeyed', 'keyed'] as const) cases.push([closer, sent]);

it.each(cases)(
  'a dead response whose queued native input %s took up is retried %s, its input stored once',
  async (closer, sent) => {
    const store = new MemoryStore();
    const { openai } = processOf(store, 0);
    const { id } = await openai.conversations.create({});
    await openai.responses.create({ input: 'step 1', conversation: id });
    const body = { input: 'step 2', conversation: id };
    const options = sent === 'keyed' ? { headers: { 'Idempotency-Key': 'step-2' } } : {};
    // Step 2 dies mid-turn; a native input is queued behind it while its lease runs.
    await dies(store, HOUR, body, options);
    const queuing = processOf(store, HOUR + 1000);
    const queued = await queuing.native('POST', `/v1/sessions/${id}/turns`, { input: 'queued', on_busy: 'enqueue' });
    expect(queued.status, queued.body).toBe(202);
    await queuing.drain();
    // Once the lease ran out, the queued input is taken up and runs to its end.
    const later = processOf(store, 2 * HOUR);
    await closers[closer](later.native, id);
    await later.drain();
    expect(await texts(later.openai, id)).toContain('assistant: echo: queued');
    // The `openai` client's retry of step 2, by another process.
    const retry = processOf(store, 3 * HOUR);
    const answer = await retry.openai.responses.create(body, options);
    expect(answer.status).toBe('completed');
    await retry.drain();
    const items = await texts(retry.openai, id);
    expect(items.filter((item) => item === 'user: step 2')).toHaveLength(1);
    // The dead turn was taken out: the queued input ran where it stood, the retry after it.
    expect(items).toEqual([
      'user: step 1',
      'assistant: echo: step 1',
      'user: queued',
      'assistant: echo: queued',
      'user: step 2',
      'assistant: echo: step 2',
    ]);
  },
);

it('a queued native input behind a dead response that cannot be taken out runs after it', async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  // Each step dies once, then its retry completes: each take-out forks one generation deeper,
  // until the conversation reads as many as a config names (test/openai/dead-step-retry.test.ts).
  let hours = 0;
  for (let step = 1; step <= 9; step++) {
    await dies(store, ++hours * HOUR, { input: `step ${step}`, conversation: id });
    const retry = processOf(store, ++hours * HOUR);
    await retry.openai.responses.create({ input: `step ${step}`, conversation: id });
    await retry.drain();
  }
  await dies(store, ++hours * HOUR, { input: 'step 10', conversation: id });
  const queuing = processOf(store, hours * HOUR + 1000);
  const queued = await queuing.native('POST', `/v1/sessions/${id}/turns`, { input: 'queued', on_busy: 'enqueue' });
  expect(queued.status, queued.body).toBe(202);
  await queuing.drain();
  // The pickup's take-out is refused: the input runs after the dead turn, not held back by it.
  const later = processOf(store, ++hours * HOUR);
  await later.native('GET', `/v1/sessions/${id}/queue`);
  await later.drain();
  const items = await texts(later.openai, id);
  expect(items.slice(-4)).toEqual([
    'assistant: echo: step 9',
    'user: step 10',
    'user: queued',
    'assistant: echo: queued',
  ]);
});

const direct: ['foreground' | 'background' | 'streamed', 'unkeyed' | 'keyed'][] = [];
for (const how of ['foreground', 'background', 'streamed'] as const)
  for (const sent of ['unkeyed', 'keyed'] as const) direct.push([how, sent]);

it.each(direct)(
  'a dead response that a %s native turn came after, once its lease ran out, is retried %s, its input stored once',
  async (how, sent) => {
    const store = new MemoryStore();
    const { openai } = processOf(store, 0);
    const { id } = await openai.conversations.create({});
    await openai.responses.create({ input: 'step 1', conversation: id });
    const body = { input: 'step 2', conversation: id };
    const options = sent === 'keyed' ? { headers: { 'Idempotency-Key': 'step-2' } } : {};
    await dies(store, HOUR, body, options);
    // A native turn on the session once the dead turn's lease ran out.
    const later = processOf(store, 2 * HOUR);
    const turn = await later.native('POST', `/v1/sessions/${id}/turns`, {
      input: 'native',
      ...(how === 'background' && { background: true }),
      ...(how === 'streamed' && { stream: true }),
    });
    expect(turn.status, turn.body).toBeLessThan(300);
    await later.drain();
    const retry = processOf(store, 3 * HOUR);
    expect((await retry.openai.responses.create(body, options)).status).toBe('completed');
    await retry.drain();
    expect(await texts(retry.openai, id)).toEqual([
      'user: step 1',
      'assistant: echo: step 1',
      'user: native',
      'assistant: echo: native',
      'user: step 2',
      'assistant: echo: step 2',
    ]);
  },
);
