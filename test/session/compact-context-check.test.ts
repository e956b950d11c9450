import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '../../lib/errors.ts';
import { contextPrefix, sessionPrefix } from '../../lib/session/keys.ts';
import type { NewContext } from '../../lib/session/log/types.ts';
import { answering, CONTEXT as valid, threeItemSession, user } from '../support/refused-writes.ts';
import { SessionLog } from '../support/session-log.ts';

// A compaction stores only a context start its readers take back (`contextStartSchema`: the
// context object, the records and the packed segments that carry it): one they would refuse is
// refused before anything is written, and the session goes on as if it had not been tried.

/** Small segments, so a few appends pack into segments whose states carry the context. */
const OPTIONS = { segmentTargetBytes: 2048, packMinRecords: 2, keepRecords: 1 };

const session = () => threeItemSession(OPTIONS);

/** Appends and packs, so the session's records, and the context they carry, go into segments. */
async function packedOn(log: SessionLog) {
  for (let round = 0; round < 4; round++) {
    await log.append('p', [user(`more ${round} `.repeat(40))]);
    await log.pack('p');
  }
}

describe('a compaction stores only a context its readers take back', () => {
  it.each<[string, NewContext, string]>([
    [
      'an empty summarized range',
      { ...valid, start_seq: 1, summarized: { first_seq: 1, last_seq: 0 } },
      'context.summarized.last_seq',
    ],
    [
      'a summarized range from seq 0',
      { ...valid, summarized: { first_seq: 0, last_seq: 2 } },
      'context.summarized.first_seq',
    ],
    ['a start at seq 0', { ...valid, start_seq: 0 }, 'context.start_seq'],
    ['a field no reader knows', { ...valid, pending: true } as NewContext, 'context'],
  ])('refuses %s with invalid_request, nothing stored, the claim ended and charged', async (_, context, field) => {
    const { store, log } = await session();
    const refused = log.compact('p', answering(context));
    await expect(refused).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(refused).rejects.toMatchObject({ code: 'invalid_request', details: { field } });
    const scope = await log.scope('p');
    expect((await store.list(contextPrefix(scope), { limit: 10 })).objects).toEqual([]);
    expect(await log.currentContext('p')).toBeNull();
    // The summary was made: its usage counts in the session's totals, and the session is free.
    expect((await log.get('p')).usage).toMatchObject({ input_tokens: 40, output_tokens: 5 });
    await packedOn(log);
    const fork = await log.fork('p', { at_seq: 3, fields: { id: 'f' } });
    expect(fork.counts.items).toBe(3);
    // Another process reads the session back whole.
    const cold = new SessionLog(store, OPTIONS);
    expect((await cold.get('p')).counts.items).toBe(7);
    expect(await cold.currentContext('p')).toBeNull();
  });

  it('stores one its readers take back, and reads it from packed segments, in another process too', async () => {
    const { store, log } = await session();
    const { context } = await log.compact('p', answering(valid));
    await packedOn(log);
    const keys = (await store.list(sessionPrefix('', 'p'), { limit: 1000 })).objects.map((object) => object.key);
    expect(keys.some((key) => key.endsWith('.seg'))).toBe(true);
    await log.fork('p', { at_seq: 4, fields: { id: 'f' } });
    const cold = new SessionLog(store, OPTIONS);
    expect(await cold.currentContext('f')).toEqual(context);
    expect(await cold.currentContext('p')).toEqual(context);
  });

  it("refuses a turn's compaction its readers would refuse, nothing stored", async () => {
    const { store, log } = await session();
    const begun = await log.beginTurn('p', { input: [user('q')] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const empty = { ...valid, start_seq: 1, summarized: { first_seq: 1, last_seq: 0 } };
    await expect(log.commitTurnContext(begun.turn, empty)).rejects.toMatchObject({
      code: 'invalid_request',
      details: { field: 'context.summarized.last_seq' },
    });
    expect((await store.list(contextPrefix(begun.turn.scope), { limit: 10 })).objects).toEqual([]);
  });
});
