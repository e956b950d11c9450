import { expect, it } from 'vitest';
import type { MemoryStore } from '../../lib/store/memory.ts';
import type { StoreCall } from '../support/faulty-store.ts';
import {
  type DeadProcess,
  deadSecondStep,
  diedOnceEach,
  diesSending,
  HOUR,
  noBodyHeldAfterEach,
  processOf,
  texts,
} from '../support/dead-process.ts';

// A conversation used through both APIs: a response answered at its end dies mid-turn (a kill -9)
// while a native input waits queued behind it. Once the dead turn's lease ran out, the pickup of
// that input takes the session; the `openai` client's retry of the response then must not store
// its input a second time, whichever closed the dead turn and however the retry is sent.

noBodyHeldAfterEach();

/** Queues a native input on session `id` from a process `offset` ms ahead, while a dead turn's lease runs. */
async function queue(store: MemoryStore, offset: number, id: string): Promise<void> {
  const queuing = processOf(store, offset);
  const queued = await queuing.native('POST', `/v1/sessions/${id}/turns`, { input: 'queued', on_busy: 'enqueue' });
  expect(queued.status, queued.body).toBe(202);
  await queuing.drain();
}

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
    // Step 2 dies mid-turn; a native input is queued behind it while its lease runs.
    const dead = await deadSecondStep(sent);
    await queue(dead.store, HOUR + 1000, dead.id);
    // Once the lease ran out, the queued input is taken up and runs to its end.
    const later = processOf(dead.store, 2 * HOUR);
    await closers[closer](later.native, dead.id);
    await later.drain();
    expect(await texts(later.openai, dead.id)).toContain('assistant: echo: queued');
    // The `openai` client's retry of step 2, by another process. The dead turn was taken out: the
    // queued input ran where it stood, the retry after it.
    const { items } = await dead.retried(['user: queued', 'assistant: echo: queued']);
    expect(items.filter((item) => item === 'user: step 2')).toHaveLength(1);
  },
);

it('a queued native input behind a dead response past the generations a config names takes its place', async () => {
  // Each step dies once, then its retry completes, until the conversation reads as many
  // generations as a config names: the next take-out flattens its history (docs/STORAGE.md).
  const { store, id, hours, statuses } = await diedOnceEach(9);
  expect(statuses).toEqual(Array(9).fill('completed'));
  await diesSending(store, hours * HOUR + HOUR, { input: 'step 10', conversation: id });
  await queue(store, hours * HOUR + HOUR + 1000, id);
  const later = processOf(store, hours * HOUR + 2 * HOUR);
  await later.native('GET', `/v1/sessions/${id}/queue`);
  await later.drain();
  const items = await texts(later.openai, id);
  expect(items.slice(-3)).toEqual(['assistant: echo: step 9', 'user: queued', 'assistant: echo: queued']);
  expect(items).toHaveLength(20);
});

const direct: ['foreground' | 'background' | 'streamed', 'unkeyed' | 'keyed'][] = [];
for (const how of ['foreground', 'background', 'streamed'] as const)
  for (const sent of ['unkeyed', 'keyed'] as const) direct.push([how, sent]);

it.each(direct)(
  'a dead response that a %s native turn came after, once its lease ran out, is retried %s, its input stored once',
  async (how, sent) => {
    const dead = await deadSecondStep(sent);
    // A native turn on the session once the dead turn's lease ran out.
    const later = processOf(dead.store, 2 * HOUR);
    const turn = await later.native('POST', `/v1/sessions/${dead.id}/turns`, {
      input: 'native',
      ...(how === 'background' && { background: true }),
      ...(how === 'streamed' && { stream: true }),
    });
    expect(turn.status, turn.body).toBeLessThan(300);
    await later.drain();
    await dead.retried(['user: native', 'assistant: echo: native']);
  },
);

it("a native turn racing a dead response's retry and its events' reader runs after the queued input", async () => {
  for (let round = 0; round < 3; round++) {
    const { store, id, body } = await deadSecondStep();
    await queue(store, HOUR + 1000, id);
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
  const { store, id, retried } = await deadSecondStep();
  // The first create-only record put, the fence of the delete that takes the dead turn out, fails.
  let failed = false;
  const fenceFails = (call: StoreCall) => {
    const fence =
      call.operation === 'put' && call.options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(call.key);
    if (!fence || failed) return false;
    failed = true;
    return true;
  };
  const later = processOf(store, 2 * HOUR, { fails: fenceFails });
  const turn = await later.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  await later.drain();
  expect(failed).toBe(true);
  // Not followed: the request failed as the store did, its input not stored.
  expect(turn.status, turn.body).toBe(503);
  const again = processOf(store, 3 * HOUR);
  const native = await again.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  expect(native.status, native.body).toBe(200);
  await again.drain();
  await retried(['user: native', 'assistant: echo: native']);
});

it('a dead turn behind the fence of a take-out whose store failed is taken out once that fence lapsed', async () => {
  const { store, id, retried } = await deadSecondStep();
  // The take-out's fence lands; the delete after it fails: the fence stays, its lease running.
  let fenced = false;
  let failed = false;
  const afterFence = (call: StoreCall) => {
    const fence =
      call.operation === 'put' && call.options?.onlyIfAbsent === true && /\/turn\/[^/]+\/\d+$/.test(call.key);
    if (fence) fenced = true;
    if (!fenced || failed || call.operation !== 'delete') return false;
    failed = true;
    return true;
  };
  const later = processOf(store, 2 * HOUR, { fails: afterFence });
  const turn = await later.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  await later.drain();
  expect(failed).toBe(true);
  expect(turn.status, turn.body).toBe(503);
  // While the fence's lease runs, the session is held (a delete that lives may still commit).
  const held = processOf(store, 2 * HOUR + 1000);
  const refused = await held.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  expect(refused.status, refused.body).toBe(409);
  // Once it ran out, the next turn takes the dead turn out from behind the fence, and runs.
  const again = processOf(store, 3 * HOUR);
  const native = await again.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  expect(native.status, native.body).toBe(200);
  await again.drain();
  await retried(['user: native', 'assistant: echo: native']);
});
