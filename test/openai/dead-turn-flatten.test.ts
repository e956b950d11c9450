import { expect, it } from 'vitest';
import { diesSending, HOUR, noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';

// A conversation at a flattening boundary: the tenth step's dead turn is taken out by a delete
// that flattens its history (lib/session/log/flatten.ts, past MAX_FORK_DEPTH generations). The
// flattened history keeps its newest records as records, as a pack leaves them: a turn after the
// flattening is taken out as any other, and the newest turn right after the flattening (the one
// before the delete's point) is deleted as the newest turn always can be.

noBodyHeldAfterEach();

const steps = (count: number) =>
  Array.from({ length: count }, (_, index) => [`user: step ${index + 1}`, `assistant: echo: step ${index + 1}`]).flat();

/**
 * Steps 1 to 10 each died once and were retried (each take-out a fork one generation deeper: the
 * tenth flattens), step 10's retry dying `deaths` more times, each after taking out the turn before
 * it. The store, the conversation, the hours the clocks came to and the retries' response ids.
 */
async function diedAtTheBoundary(deaths: number, chained: boolean) {
  const store = new MemoryStore();
  const { id } = await processOf(store, 0).openai.conversations.create({});
  let hours = 0;
  let previous: string | undefined;
  const ids: string[] = [];
  for (let step = 1; step <= 10; step++) {
    const body =
      chained && previous
        ? { input: `step ${step}`, previous_response_id: previous }
        : { input: `step ${step}`, conversation: id };
    await diesSending(store, ++hours * HOUR, body);
    if (step === 10) for (let again = 0; again < deaths; again++) await diesSending(store, ++hours * HOUR, body);
    const retry = processOf(store, ++hours * HOUR);
    const answer = await retry.openai.responses.create(body);
    expect(answer.status, `step ${step}`).toBe('completed');
    await retry.drain();
    expect(retry.logged.filter((line) => line.includes('stays in its session'))).toEqual([]);
    ids.push(answer.id);
    previous = answer.id;
  }
  return { store, id, hours, ids };
}

it.each([
  [1, false],
  [2, false],
  [2, true],
])(
  'a retry dying after a flattening take-out is taken out in turn (%i more deaths, chained: %s)',
  async (deaths, chained) => {
    const { store, id, hours } = await diedAtTheBoundary(deaths, chained);
    const later = processOf(store, (hours + 1) * HOUR);
    expect(await texts(later.openai, id)).toEqual(steps(10));
    await later.openai.responses.create({ input: 'step 11', conversation: id });
    expect(await texts(later.openai, id)).toEqual(steps(11));
  },
);

it('a response kept before a flattening delete is the newest, and deleted as the newest is', async () => {
  const store = new MemoryStore();
  const { openai } = processOf(store, 0);
  const { id } = await openai.conversations.create({});
  const named = async () =>
    JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body)).named;
  // Each step kept, then one deleted: a fork one generation deeper each time, until a delete flattens.
  let kept = '';
  const expected: string[] = [];
  for (let step = 1; !(await named()); step++) {
    expect(step, 'a delete flattened').toBeLessThanOrEqual(12);
    kept = (await openai.responses.create({ input: `kept ${step}`, conversation: id })).id;
    expected.push(`user: kept ${step}`, `assistant: echo: kept ${step}`);
    const gone = await openai.responses.create({ input: `gone ${step}`, conversation: id });
    await openai.responses.delete(gone.id);
  }
  expect(await texts(openai, id)).toEqual(expected);
  await openai.responses.delete(kept);
  await expect(openai.responses.retrieve(kept)).rejects.toMatchObject({ status: 404 });
  expect(await texts(openai, id)).toEqual(expected.slice(0, -2));
  await openai.responses.create({ input: 'again', conversation: id });
  expect(await texts(openai, id)).toEqual([...expected.slice(0, -2), 'user: again', 'assistant: echo: again']);
});
