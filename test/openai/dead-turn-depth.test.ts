import { expect, it } from 'vitest';
import { diedOnceEach, diesSending, HOUR, noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

// A long-running agent whose server dies again and again: each dead turn is taken out of its
// conversation by a fork of itself one generation deeper, past the generations a config may name
// (MAX_FORK_DEPTH). The conversation then reads its history as its own (a flattened generation):
// every retry stores its input once, and the conversation goes on under `conversation`,
// `previous_response_id` and the native API.

noBodyHeldAfterEach();

const steps = (count: number) =>
  Array.from({ length: count }, (_, index) => [`user: step ${index + 1}`, `assistant: echo: step ${index + 1}`]).flat();

it.each([false, true])('a conversation survives 20 dead turns in a row (chained: %s)', async (chained) => {
  const { store, id, hours, statuses, previous, ids } = await diedOnceEach(20, chained);
  expect(statuses).toEqual(Array(20).fill('completed'));
  const later = processOf(store, hours * HOUR + HOUR);
  expect(await texts(later.openai, id)).toEqual(steps(20));
  // Every response is still found by its id, with its own output.
  for (const [index, response] of ids.entries()) {
    const found = await later.openai.responses.retrieve(response!);
    expect(found.output_text).toBe(`echo: step ${index + 1}`);
  }
  // The newest response is still the conversation's newest: a step naming it goes on there.
  if (previous) {
    const next = await later.openai.responses.create({ input: 'step 21', previous_response_id: previous });
    expect(next.status).toBe('completed');
    // Deleted, its turn is taken again: its id never names the turn that took its place.
    await later.openai.responses.delete(next.id);
    const again = await later.openai.responses.create({ input: 'step 21', previous_response_id: previous });
    await expect(later.openai.responses.retrieve(next.id)).rejects.toMatchObject({ status: 404 });
    expect((await later.openai.responses.retrieve(again.id)).output_text).toBe('echo: step 21');
    expect((await later.openai.responses.retrieve(previous)).status).toBe('completed');
  } else await later.openai.responses.create({ input: 'step 21', conversation: id });
  const turn = await later.native('POST', `/v1/sessions/${id}/turns`, { input: 'native' });
  expect(turn.status, turn.body).toBe(200);
  await later.drain();
  expect(await texts(later.openai, id)).toEqual([...steps(21), 'user: native', 'assistant: echo: native']);
});

it('a streamed response before a flattening replays its events from its id', async () => {
  const store = new MemoryStore();
  const first = processOf(store, 0);
  const { id } = await first.openai.conversations.create({});
  let streamed = '';
  for await (const event of await first.openai.responses.create({ input: 'streamed', conversation: id, stream: true }))
    if (event.type === 'response.completed') streamed = event.response.id;
  await first.drain();
  // Ten steps that each died once: the ninth take-out flattens the history.
  for (let step = 1; step <= 10; step++) {
    const body = { input: `step ${step}`, conversation: id };
    await diesSending(store, (2 * step - 1) * HOUR, body);
    const retry = processOf(store, 2 * step * HOUR);
    expect((await retry.openai.responses.create(body)).status).toBe('completed');
    await retry.drain();
  }
  const later = processOf(store, 21 * HOUR);
  expect(await texts(later.openai, id)).toEqual(['user: streamed', 'assistant: echo: streamed', ...steps(10)]);
  const types: string[] = [];
  for await (const event of await later.openai.responses.retrieve(streamed, { stream: true })) types.push(event.type);
  expect(types.at(0)).toBe('response.created');
  expect(types.at(-1)).toBe('response.completed');
});

it('a history resent whole goes on in its conversation past a flattening', async () => {
  const store = new MemoryStore();
  const first = await processOf(store, 0).openai.responses.create({ input: [{ role: 'user', content: 'step 0' }] });
  const session = first.conversation?.id;
  expect(session).toBeDefined();
  const history = [
    { role: 'user' as const, content: 'step 0' },
    { role: 'assistant' as const, content: first.output_text },
  ];
  // Ten steps that each died once: the ninth take-out flattens the history.
  for (let step = 1; step <= 10; step++) {
    const body = { input: [...history, { role: 'user' as const, content: `step ${step}` }] };
    await diesSending(store, (2 * step - 1) * HOUR, body);
    const retry = processOf(store, 2 * step * HOUR);
    const answer = await retry.openai.responses.create(body);
    await retry.drain();
    expect(answer.conversation?.id, `step ${step}`).toBe(session);
    history.push({ role: 'user', content: `step ${step}` }, { role: 'assistant', content: answer.output_text });
  }
  const later = processOf(store, 21 * HOUR);
  expect(await texts(later.openai, session!)).toEqual(['user: step 0', 'assistant: echo: step 0', ...steps(10)]);
});
