import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { queueSignalKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { clientInProcess, TOKEN } from './server.ts';
import { deadSecondStep, environment, HOUR, noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';

// The edges of taking a dead response out (lib/turn/dead-turn.ts): a native `interrupt` that
// meets it while its lease still runs, and a compaction naming the response before it.

noBodyHeldAfterEach();
const heldEcho = releasedAfterEach();

for (const sent of ['unkeyed', 'keyed'] as const)
  it(`an interrupt meeting a dead response in its lease takes it out: its ${sent} retry stores it once`, async () => {
    const dead = await deadSecondStep(sent);
    // The dead turn's lease (3 s from its claim, an hour ahead) still runs.
    const later = processOf(dead.store, HOUR + 1000);
    const turn = await later.native('POST', `/v1/sessions/${dead.id}/turns`, { input: 'native', on_busy: 'interrupt' });
    expect(turn.status, turn.body).toBe(200);
    await later.drain();
    expect(await texts(later.openai, dead.id)).toEqual([
      'user: step 1',
      'assistant: echo: step 1',
      'user: native',
      'assistant: echo: native',
    ]);
    await dead.retried(['user: native', 'assistant: echo: native']);
  });

it('an interrupt of a live response answered at its end takes it out: its retried 409 stores it once', async () => {
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const store = new MemoryStore();
  const app = createApp({ store: () => store, readEnvironment: () => environment, ...options });
  const openai = clientInProcess(app, TOKEN);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'one', conversation: id });
  const body = { input: 'slow two', conversation: id };
  const sent = openai.responses.create(body, { maxRetries: 0 }).catch((error: unknown) => error);
  while (slow.signals.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const turn = await app.request(`http://tailgate.test/v1/sessions/${id}/turns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'native', on_busy: 'interrupt' }),
  });
  expect(turn.status, await turn.text()).toBe(200);
  const answer = await sent;
  expect(answer).toBeInstanceOf(OpenAI.APIError);
  expect((answer as InstanceType<typeof OpenAI.APIError>).code).toBe('turn_cancelled');
  await drain();
  expect(await texts(openai, id)).toEqual([
    'user: one',
    'assistant: echo: one',
    'user: native',
    'assistant: echo: native',
  ]);
  // The `openai` client retries the 409: its input is stored once, after the interrupting turn.
  slow.release();
  expect((await openai.responses.create(body)).status).toBe('completed');
  await drain();
  expect(await texts(openai, id)).toEqual([
    'user: one',
    'assistant: echo: one',
    'user: native',
    'assistant: echo: native',
    'user: slow two',
    'assistant: echo: slow two',
  ]);
});

it('an interrupt meeting a dead streamed response leaves it cancelled in its conversation', async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'step 1', conversation: id });
  // Its id was given out with its first event: it is no response answered at its end.
  const dying = processOf(store, HOUR, { dying: true });
  await dying.dies(async () => {
    const stream = await dying.openai.responses.create({ input: 'step 2', conversation: id, stream: true });
    for await (const _ of stream);
  });
  const later = processOf(store, HOUR + 1000);
  const turn = await later.native('POST', `/v1/sessions/${id}/turns`, { input: 'native', on_busy: 'interrupt' });
  expect(turn.status, turn.body).toBe(200);
  await later.drain();
  expect(await texts(later.openai, id)).toEqual([
    'user: step 1',
    'assistant: echo: step 1',
    'user: step 2',
    'user: native',
    'assistant: echo: native',
  ]);
});

it('responses.compact naming the response before a dead turn, its lease run out, takes it out', async () => {
  const dead = await deadSecondStep();
  const later = processOf(dead.store, 2 * HOUR);
  const compacted = await later.openai.responses.compact({ model: 'echo', previous_response_id: dead.first });
  expect(compacted.output.map((item) => item.type)).toEqual(['compaction']);
  await later.drain();
  expect(await texts(later.openai, dead.id)).not.toContain('user: step 2');
  // The `openai` client's retry of step 2 goes on after the compaction, its input stored once.
  const retry = processOf(dead.store, 3 * HOUR);
  expect((await retry.openai.responses.create(dead.body)).status).toBe('completed');
  await retry.drain();
  const items = await texts(retry.openai, dead.id);
  expect(items.filter((item) => item === 'user: step 2')).toHaveLength(1);
});

it('responses.compact naming the response before a dead turn within its lease is 409 turn_in_progress', async () => {
  const dead = await deadSecondStep();
  const later = processOf(dead.store, HOUR + 1000);
  const refused = await later.openai.responses
    .compact({ model: 'echo', previous_response_id: dead.first }, { maxRetries: 0 })
    .catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(OpenAI.APIError);
  expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(409);
  expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('turn_in_progress');
  await later.drain();
});

it('responses.compact naming a response older than the one before the newest turn still branches', async () => {
  const dead = await deadSecondStep();
  const later = processOf(dead.store, 2 * HOUR);
  // The retry completes step 2: step 1's response is no longer the newest.
  await dead.retried([]);
  const refused = await later.openai.responses
    .compact({ model: 'echo', previous_response_id: dead.first }, { maxRetries: 0 })
    .catch((error: unknown) => error);
  expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('conversation_branching_unsupported');
  await later.drain();
});

// The pickups that take a dead turn out (after its lease's close, a listing of the queue) lower
// no signal themselves: the queued input's turn, claimed in the generation the take-out moved
// to, lists that generation's signal, and its close lowers it there (lib/turn/pickup.ts pickUp).
for (const closer of ['a listing of the queue', "a reader of the dead turn's events"] as const)
  it(`the queue's signal is lowered in the new generation once ${closer} took the dead turn out`, async () => {
    const dead = await deadSecondStep();
    const queuing = processOf(dead.store, HOUR + 1000);
    const queued = await queuing.native('POST', `/v1/sessions/${dead.id}/turns`, {
      input: 'queued',
      on_busy: 'enqueue',
    });
    expect(queued.status, queued.body).toBe(202);
    await queuing.drain();
    const later = processOf(dead.store, 2 * HOUR);
    const path = closer === 'a listing of the queue' ? 'queue' : 'turns/2/events';
    await later.native('GET', `/v1/sessions/${dead.id}/${path}`);
    await later.drain();
    expect(await texts(later.openai, dead.id)).toEqual([
      'user: step 1',
      'assistant: echo: step 1',
      'user: queued',
      'assistant: echo: queued',
    ]);
    const scope = await new SessionLog(dead.store).scope(dead.id);
    expect(scope.queuedIn?.length).toBe(1);
    const signal = await dead.store.get(queueSignalKey(scope));
    expect(signal?.size).toBe(0);
  });
