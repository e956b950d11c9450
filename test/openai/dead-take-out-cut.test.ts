import { expect, it } from 'vitest';
import type { MemoryStore } from '../../lib/store/memory.ts';
import {
  answeringCall,
  diesSending,
  HOUR,
  LOOP,
  noBodyHeldAfterEach,
  processOf,
  texts,
  tools,
} from '../support/dead-process.ts';

// A step whose process died mid-turn, retried by a process that dies in turn while it takes that
// dead turn out (after the delete's fence landed, before its commit): once the fence's lease ran
// out, the next request takes the dead turn out from behind the fence (docs/OPENAI.md), and the
// retry goes on after the turn before it, its outputs stored once, never a 400 for the calls that
// turn answered.

noBodyHeldAfterEach();

/**
 * Sends `body` from a process two hours ahead, once the dead turn's lease ran out: it closes the
 * dead turn and lands the fence of its take-out, then dies (every call after that fence put
 * fails). What it was answered, and whether that fence landed.
 */
async function cutOff(store: MemoryStore, body: object, options: object = {}) {
  let closed = false;
  let fenced = false;
  const cut = processOf(store, 2 * HOUR, {
    fails: ({ operation, key }) => {
      if (fenced) return true;
      if (operation === 'put' && key.endsWith('.done')) closed = true;
      else if (operation === 'put' && closed && /\/turn\/[^/]+\/\d+$/.test(key)) fenced = true;
      return false;
    },
  });
  const answer = await cut.openai.responses.create(body as never, options).catch((error: unknown) => error);
  return { answer, fenced };
}

/** `body` sent from a process three hours ahead, once the fence's lease ran out too: its answer, or the error. */
const retried = (store: MemoryStore, body: object, options: object = {}) =>
  processOf(store, 3 * HOUR)
    .openai.responses.create(body as never, options)
    .catch((error: unknown) => error);

it.each(['conversation', 'previous_response_id'] as const)(
  'an unkeyed step under %s answering a call, whose dead turn a retry began taking out and died, goes on once',
  async (under) => {
    const { store, conversation, response, input } = await answeringCall();
    const body = {
      input,
      tools,
      ...(under === 'conversation' ? { conversation } : { previous_response_id: response }),
    };
    await diesSending(store, HOUR, body);
    const cut = await cutOff(store, body);
    expect(cut.fenced).toBe(true);
    expect(cut.answer).toMatchObject({ status: 503 });
    // Once the fence's lease ran out too: the dead turn is taken out, and the retry takes its place.
    const retry = await retried(store, body);
    expect(retry).toMatchObject({ status: 'completed', conversation: { id: conversation } });
    expect(await texts(processOf(store, 3 * HOUR).openai, conversation)).toEqual([
      ...LOOP,
      'assistant: echo: call get_weather {"city":"x"}',
    ]);
  },
);

it('a keyed step whose dead turn a retry began taking out, then died, runs once that take-out is done', async () => {
  const { store, conversation, body } = await answeringCall();
  const options = { headers: { 'Idempotency-Key': 'cut-step' } };
  await diesSending(store, HOUR, body, options);
  expect((await cutOff(store, body, options)).fenced).toBe(true);
  const retry = await retried(store, body, options);
  // As docs/OPENAI.md says: the dead turn behind the fence is taken out, its input stored once.
  expect(retry).toMatchObject({ status: 'completed', conversation: { id: conversation } });
  expect(await texts(processOf(store, 3 * HOUR).openai, conversation)).toEqual([
    ...LOOP,
    'assistant: echo: call get_weather {"city":"x"}',
  ]);
});
