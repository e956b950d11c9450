import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { StoreCall } from '../support/faulty-store.ts';
import { type DeadProcess, HOUR, processOf, texts } from '../support/dead-process.ts';

// A conversation used through both APIs: a response answered at its end dies mid-turn (a kill -9)
// while a native input waits queued behind it. Once the dead turn's lease ran out, the pickup of
// that input takes the session; the `openai` client's retry of the response then must not store
// its input a second time, whichever closed the dead turn and however the retry is sent.

/** What closes the dead turn before the retry: the pickup's own claim, or a reader of its events. */
const closers = {
  'the pickup of a listing': async (native: DeadProcess['native'], id: string) =>
    native('GET', `/v1/sessions/${id}/queue`),
  "a reader of the dead turn's events": async (native: DeadProcess['native'], id: string) =>
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
    const dying = processOf(store, HOUR, true);
    await dying.dies(() => dying.openai.responses.create(body, options));
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
  const dies = async (input: string) => {
    const dying = processOf(store, ++hours * HOUR, true);
    await dying.dies(() => dying.openai.responses.create({ input, conversation: id }));
  };
  for (let step = 1; step <= 9; step++) {
    await dies(`step ${step}`);
    const retry = processOf(store, ++hours * HOUR);
    await retry.openai.responses.create({ input: `step ${step}`, conversation: id });
    await retry.drain();
  }
  await dies('step 10');
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
    const dying = processOf(store, HOUR, true);
    await dying.dies(() => dying.openai.responses.create(body, options));
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

it("a native turn racing a dead response's retry and its events' reader runs after the queued input", async () => {
  for (let round = 0; round < 3; round++) {
    const store = new MemoryStore();
    const { openai } = processOf(store, 0);
    const { id } = await openai.conversations.create({});
    await openai.responses.create({ input: 'step 1', conversation: id });
    const body = { input: 'step 2', conversation: id };
    const dying = processOf(store, HOUR, true);
    await dying.dies(() => dying.openai.responses.create(body));
    const queuing = processOf(store, HOUR + 1000);
    const queued = await queuing.native('POST', `/v1/sessions/${id}/turns`, { input: 'queued', on_busy: 'enqueue' });
    expect(queued.status, queued.body).toBe(202);
    await queuing.drain();
    // Once the lease ran out, at once: a native turn, the response's retry (which takes the dead
    // turn out, its delete holding the session meanwhile) and a reader that closes the dead turn.
    const [native, retry, reader] = [0, 1, 2].map(() => processOf(store, 2 * HOUR));
    const [turn] = await Promise.all([
      native!.native('POST', `/v1/sessions/${id}/turns`, { input: 'native', on_busy: 'enqueue' }),
      retry!.openai.responses.create(body, { maxRetries: 0 }).catch(() => undefined),
      reader!.native('GET', `/v1/sessions/${id}/turns/2/events`),
    ]);
    expect(turn!.status, turn!.body).toBeLessThan(300);
    await Promise.all([native!.drain(), retry!.drain(), reader!.drain()]);
    const later = processOf(store, 3 * HOUR);
    await later.native('GET', `/v1/sessions/${id}/queue`);
    await later.drain();
    const items = (await texts(later.openai, id)).filter((item) => item === 'user: queued' || item === 'user: native');
    expect(items).toEqual(['user: queued', 'user: native']);
  }
});

it('a native turn whose take-out of a dead turn met a failing store fails; its retry takes it out', async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'step 1', conversation: id });
  const body = { input: 'step 2', conversation: id };
  const dying = processOf(store, HOUR, true);
  await dying.dies(() => dying.openai.responses.create(body));
  // The first create-only record put, the fence of the delete that takes the dead turn out, fails.
  let failed = false;
  const fenceFails = (call: StoreCall) => {
    const fence =
      call.operation === 'put' && call.options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(call.key);
    if (!fence || failed) return false;
    failed = true;
    return true;
  };
  const later = processOf(store, 2 * HOUR, false, fenceFails);
  const turn = await later.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  await later.drain();
  expect(failed).toBe(true);
  // Not followed: the request failed as the store did, its input not stored.
  expect(turn.status, turn.body).toBe(503);
  const again = processOf(store, 3 * HOUR);
  const retried = await again.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  expect(retried.status, retried.body).toBe(200);
  await again.drain();
  expect((await again.openai.responses.create(body)).status).toBe('completed');
  await again.drain();
  expect(await texts(again.openai, id)).toEqual([
    'user: step 1',
    'assistant: echo: step 1',
    'user: native',
    'assistant: echo: native',
    'user: step 2',
    'assistant: echo: step 2',
  ]);
});
