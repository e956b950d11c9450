import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/index.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey, sessionPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { type HeldCall, HeldStore } from '../support/held-store.ts';
import { JitteryStore } from './jittery-store.ts';

const keyPrefix = 'p/';
const since = new Date(Date.now() - 60_000).toISOString();
const inboxOn = (store: ObjectStore) =>
  new Inbox(store, { keyPrefix, sessionExists: sessionExistsIn(store, keyPrefix) });
const lostUpTo = (last: number) => Array.from({ length: last - 7 }, (_, index) => ({ turn: 8 + index, since }));

/**
 * A memory store whose clock ticks a millisecond a call (each write its own upload time, as
 * writes seconds apart on S3), holding turn 8's delivery record of `note.md` ('once').
 */
async function consumedByTurn8() {
  let now = Date.now();
  const memory = new MemoryStore({ clock: () => new Date(++now) });
  await memory.put(sessionConfigKey(keyPrefix, 's1'), '{}');
  const inbox = inboxOn(memory);
  await inbox.post('s1', { name: 'note.md', content: 'once' });
  await inbox.consume('s1', { turn: 8 });
  const record = `${sessionPrefix(keyPrefix, 's1')}inbox_removed/note.md`;
  const rewriteOf = ({ operation, keys, options }: HeldCall) =>
    operation === 'put' && keys[0] === record && options?.ifMatch !== undefined;
  return { memory, inbox, record, rewriteOf };
}

/** Every turn that has the notice, or will: those given it, and one per notice pending. */
async function holders(inbox: Inbox, ...taken: { content: string }[][]) {
  const pending = await inbox.listPending('s1');
  return [...taken.flat().map((notice) => notice.content), ...pending.map(() => 'once')];
}

/**
 * Turn 9 takes turn 8's notice over and stalls before its rewrite; turn 10, closed still
 * running too, took it over after turn 9.
 */
async function stalledThenTakenOver() {
  const { memory, inbox, rewriteOf } = await consumedByTurn8();
  const held = new HeldStore(memory);
  const rewrite = held.hold(rewriteOf);
  const stalled = inboxOn(held).recover('s1', lostUpTo(8), 9);
  await rewrite.reached;
  const tenth = await inbox.recover('s1', lostUpTo(9), 10);
  expect(tenth.map((notice) => notice.content)).toEqual(['once']);
  return { memory, inbox, held, rewrite, rewriteOf, stalled, tenth };
}

describe('a stalled taker whose rewrite of a closed turn’s notice lands after its successor kept it', () => {
  it('leaves the notice to one turn when a turn after the successor read the record it rewrote', async () => {
    const { inbox, held, rewrite, rewriteOf, stalled, tenth } = await stalledThenTakenOver();
    // Turn 9's rewrite lands; it stalls before it puts the record back to name turn 10.
    const putBack = held.hold(rewriteOf);
    rewrite.release();
    await putBack.reached;
    // Turn 11 finds the record naming turn 9 and takes it over; then turn 10 gives back at its close.
    const eleventh = await inbox.recover('s1', lostUpTo(10), 11);
    putBack.release();
    expect(await stalled).toEqual([]);
    await inbox.giveBack('s1', tenth, 10);
    expect(await holders(inbox, eleventh)).toEqual(['once']);
  });

  it.each([
    ['read the record and stalls before its decision key', '/taken-'],
    ['rewrote the record and stalls before it posts the notice again', '/inbox/'],
  ])('leaves the notice to one turn when the successor’s give-back %s', async (_, at) => {
    const { memory, inbox, rewrite, stalled, tenth } = await stalledThenTakenOver();
    const giving = new HeldStore(memory);
    const gate = giving.hold(({ operation, keys }) => operation === 'put' && keys[0]!.includes(at));
    const given = inboxOn(giving).giveBack('s1', tenth, 10);
    await gate.reached;
    // Turn 9's rewrite lands and it puts the record back to name turn 10; turn 11 takes it over.
    rewrite.release();
    expect(await stalled).toEqual([]);
    const eleventh = await inbox.recover('s1', lostUpTo(10), 11);
    gate.release();
    await given;
    expect(await holders(inbox, eleventh)).toEqual(['once']);
  });
});

describe('closed turns taking a notice over and giving it back, in any order, one of them dying', () => {
  it('leave it to exactly one turn that completes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(0, 9, 10, 11),
        fc.integer({ min: 1, max: 8 }),
        fc.boolean(),
        fc.boolean(),
        async (dying, at, landed, eleventhCompletes) => {
          const { memory } = await consumedByTurn8();
          // Turns 9 and 10 are closed by someone else while they run, and 11 too unless it
          // completes; each takes over what the turns before it consumed, then gives back what
          // it took at its close. Turn `dying` dies at its `at`th storage call instead.
          const run = async (turn: number, closed: boolean) => {
            const faulty = new FaultyStore(memory);
            let calls = 0;
            if (turn === dying)
              faulty.failWhen(() => ++calls >= at, { after: landed, times: 1 }).failWhen(() => calls >= at);
            const inbox = new Inbox(new JitteryStore(faulty, 3), {
              keyPrefix,
              log: () => {},
              sessionExists: async () => true,
            });
            const taken = await inbox.recover('s1', lostUpTo(turn - 1), turn).catch(() => []);
            if (faulty.injected > 0) return { taken: [], closed: true };
            faulty.heal(); // it dies taking over, or not at all (dying giving back is a double fault)
            if (closed) await inbox.giveBack('s1', taken, turn);
            return { taken: closed ? [] : taken, closed };
          };
          const [, , eleventh] = await Promise.all([run(9, true), run(10, true), run(11, !eleventhCompletes)]);
          const inbox = inboxOn(memory);
          const twelfth = eleventh!.closed ? await inbox.recover('s1', lostUpTo(11), 12) : [];
          expect(await holders(inbox, eleventh!.taken, twelfth)).toEqual(['once']);
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('a taker whose rewrite of a closed turn’s delivery record fails without landing', () => {
  it.each([false, true])('has the notice all the same (closed by someone else: %s)', async (closed) => {
    const { memory, inbox, rewriteOf } = await consumedByTurn8();
    const faulty = new FaultyStore(memory).failWhen(
      ({ operation, key, options }) => rewriteOf({ operation, keys: [key], ...(options ? { options } : {}) }),
      { times: 1 },
    );
    const ninth = await inboxOn(faulty).recover('s1', lostUpTo(8), 9);
    // Turn 9 completes: no turn after it carries a closed turn, so it must have had the notice.
    if (!closed) return expect(await holders(inbox, ninth)).toEqual(['once']);
    // Turn 9 was closed still running: it gives back, and turn 10 takes over what is left.
    await inbox.giveBack('s1', ninth, 9);
    expect(await holders(inbox, await inbox.recover('s1', lostUpTo(9), 10))).toEqual(['once']);
  });
});

describe('closed turns taking two notices over, any failing at a storage call, the consumer giving back', () => {
  it('leave each to exactly one turn that completes, also after a rewrite without `taken-as`', async () => {
    const turnSpec = fc.record({
      fault: fc.option(fc.record({ at: fc.integer({ min: 1, max: 14 }), landed: fc.boolean(), dies: fc.boolean() })),
      delay: fc.integer({ min: 0, max: 6 }),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(turnSpec, { minLength: 2, maxLength: 6 }),
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 8 })),
        fc.boolean(),
        async (turns, lastCompletes, consumerGivesBackAt, oldFormat) => {
          const { memory, inbox, record } = await consumedByTurn8();
          await inbox.post('s1', { name: 'other.md', content: 'twice' });
          await inbox.consume('s1', { turn: 8 });
          // A record an earlier version rewrote when turn 8 took it over: it names 8, no `taken-as`.
          if (oldFormat) {
            const object = (await memory.get(record))!;
            await memory.put(`${record}/taken-7-${object.uploaded.getTime()}`, '8:old', { onlyIfAbsent: true });
            await memory.put(record, object.body, { metadata: object.metadata });
          }
          const last = 8 + turns.length;
          // Turns 9 to `last` run at once (each closed by someone else, but `last` when it completes);
          // a faulty one fails at its `at`th call (that call landing or not), and only that one
          // unless it dies there; a turn whose takeover failed is closed, walked past by the next.
          const run = async (turn: number, { fault, delay }: (typeof turns)[number]) => {
            await new Promise((go) => setTimeout(go, delay));
            const faulty = new FaultyStore(memory);
            let calls = 0;
            if (fault) faulty.failWhen(() => ++calls >= fault.at, { after: fault.landed, times: 1 });
            if (fault?.dies) faulty.failWhen(() => calls >= fault.at);
            const each = new Inbox(new JitteryStore(faulty, 3), {
              keyPrefix,
              log: () => {},
              sessionExists: async () => true,
            });
            const taken = await each.recover('s1', lostUpTo(turn - 1), turn).catch(() => null);
            if (taken === null) return { taken: [], closed: true };
            faulty.heal();
            const closed = turn !== last || !lastCompletes;
            if (closed) await each.giveBack('s1', taken, turn);
            return { taken: closed ? [] : taken, closed };
          };
          const consumer = async (at: number | null) => {
            if (at === null) return;
            await new Promise((go) => setTimeout(go, at));
            const notices = ['note.md', 'other.md'].map((name) => ({ name, stored_as: name }));
            await new Inbox(new JitteryStore(memory, 3), {
              keyPrefix,
              log: () => {},
              sessionExists: async () => true,
            }).giveBack('s1', notices, 8);
          };
          const [ran] = await Promise.all([
            Promise.all(turns.map((spec, index) => run(9 + index, spec))),
            consumer(consumerGivesBackAt),
          ]);
          const final = ran.at(-1)!;
          const after = final.closed ? await inbox.recover('s1', lostUpTo(last), last + 1) : [];
          const pending = await inbox.listPending('s1');
          const names = [...final.taken, ...after, ...pending].map((notice) => notice.name);
          expect(names.sort()).toEqual(['note.md', 'other.md']);
        },
      ),
      { numRuns: 100 },
    );
  });
});
