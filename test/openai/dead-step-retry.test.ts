import type OpenAI from 'openai';
import { expect, it } from 'vitest';
import type { MemoryStore } from '../../lib/store/memory.ts';
import { answeringCall, HOUR, LOOP, noBodyHeldAfterEach, processOf, status, texts } from '../support/dead-process.ts';

// Steps of a conversation whose process died mid-turn (its store refuses everything from the
// moment its model was called, as after a kill -9), retried by other processes on the same
// store, their clocks past the dead turn's lease or not: the input is stored once, a retry that
// comes while the lease runs is answered 409 (which the `openai` client retries), and one under
// an Idempotency-Key is answered from its key.

type Kind = 'plain' | 'stream' | 'background';

/** Sends `body` as `kind` asks (a stream read to its end): the response, or the error thrown. */
function send(openai: OpenAI, body: object, kind: Kind, key?: string): Promise<unknown> {
  const options = key ? { headers: { 'Idempotency-Key': key } } : {};
  const full = {
    ...body,
    ...(kind === 'stream' && { stream: true }),
    ...(kind === 'background' && { background: true }),
  };
  return (async () => {
    const response = await openai.responses.create(full as never, options);
    if (kind === 'stream') for await (const _ of response as unknown as AsyncIterable<unknown>);
    return response;
  })().catch((error: unknown) => error);
}

noBodyHeldAfterEach();

/** Sends `body` from a process that dies during its turn (in the background, once it answered). */
async function dies(store: MemoryStore, offset: number, body: object, kind: Kind, key?: string): Promise<void> {
  const dead = processOf(store, offset, { dying: true });
  await dead.dies(() => send(dead.openai, body, kind, key));
}

it.each(['plain', 'stream'] as const)(
  'an unkeyed %s step answering a call, retried while its dead turn runs, is answered 409, then goes on',
  async (kind) => {
    const { store, conversation, body } = await answeringCall();
    await dies(store, HOUR, body, kind);
    // Its lease runs: 409 turn_in_progress, not a 400 for a call answered already.
    const early = await send(processOf(store, HOUR + 1000).openai, body, kind);
    expect(early).toMatchObject({ status: 409, code: 'turn_in_progress' });
    // Once it ran out: the attempt failed, the output it stored is taken, not stored again.
    const late = await send(processOf(store, 2 * HOUR).openai, body, kind);
    expect(late).not.toBeInstanceOf(Error);
    const items = await texts(processOf(store, 2 * HOUR).openai, conversation);
    expect(items).toEqual([...LOOP, 'assistant: echo: call get_weather {"city":"x"}']);
  },
);

// The dead turn's lease runs out while the retry runs, after each of its storage calls in turn:
// the retry is answered 409 (its lease ran when it was read) or goes on after the failed attempt,
// never refused 400 for the calls that attempt answered.
const lapses: [Kind, number][] = [];
for (const kind of ['plain', 'stream'] as const) for (let at = 1; at <= 16; at++) lapses.push([kind, at]);

it.each(lapses)(
  'an unkeyed %s step answering a call, its dead turn lapsing after call %i of the retry, goes on once',
  async (kind, at) => {
    const { store, conversation, body } = await answeringCall();
    await dies(store, HOUR, body, kind);
    let answer = await send(processOf(store, HOUR + 1000, { passAt: at }).openai, body, kind);
    if (answer instanceof Error) {
      expect(answer).toMatchObject({ status: 409, code: 'turn_in_progress' });
      answer = await send(processOf(store, 3 * HOUR).openai, body, kind);
    }
    expect(answer).not.toBeInstanceOf(Error);
    const items = await texts(processOf(store, 3 * HOUR).openai, conversation);
    expect(items).toEqual([...LOOP, 'assistant: echo: call get_weather {"city":"x"}']);
  },
);

it.each(['plain', 'stream', 'background'] as const)(
  'a %s step under an Idempotency-Key whose process died twice stores its input once',
  async (kind) => {
    const { store, conversation, body } = await answeringCall();
    await dies(store, HOUR, body, kind, 'step-key');
    await dies(store, 2 * HOUR, body, kind, 'step-key');
    const answer = await send(processOf(store, 3 * HOUR).openai, body, kind, 'step-key');
    // Answered from its key: completed once its dead turns were taken out (answered at its end),
    // else as its first attempt ended (409 lease_expired; a background response, `failed`).
    if (kind === 'plain') expect(status(answer)).toBe('completed');
    else if (kind === 'stream') expect(answer).toMatchObject({ status: 409, code: 'lease_expired' });
    else expect(status(answer)).toBe('failed');
    const items = await texts(processOf(store, 3 * HOUR).openai, conversation);
    expect(items.slice(0, 3)).toEqual(LOOP);
    expect(items.filter((item) => item === 'function_call_output')).toHaveLength(1);
  },
);

// (Not in the background, whose retry of such a step is refused 400 once it failed: docs/OPENAI.md.)
it.each(['stream'] as const)(
  'an unkeyed %s step answering a call, retried while the dead retake of it runs, is answered 409, then goes on',
  async (kind) => {
    const { store, conversation, body } = await answeringCall();
    await dies(store, HOUR, body, kind);
    // Its retry takes the step again (its outputs stored by the first attempt) and dies too.
    await dies(store, 2 * HOUR, body, kind);
    // That retake's lease runs: 409 turn_in_progress, not a 400 for a call answered already.
    const early = await send(processOf(store, 2 * HOUR + 1000).openai, body, kind);
    expect(early).toMatchObject({ status: 409, code: 'turn_in_progress' });
    const late = await send(processOf(store, 3 * HOUR).openai, body, kind);
    expect(late).not.toBeInstanceOf(Error);
    const items = await texts(processOf(store, 3 * HOUR).openai, conversation);
    expect(items).toEqual([...LOOP, 'assistant: echo: call get_weather {"city":"x"}']);
  },
);
