import { beforeEach, describe, expect, it, vi } from 'vitest';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { attempt, LEASE_MS } from '../support/simulation.ts';
import { copyStore } from '../support/copy-store.ts';
import type { Item } from '../../lib/items.ts';
import { SessionLog } from '../support/session-log.ts';
import { InterleavedStore } from './fork-simulation-suite.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

/**
 * A delete of the newest turn that flattens the history (lib/session/log/flatten.ts: the session
 * reads as many generations as a config names) crashed at each of its storage calls, before the
 * call and after it landed: what it left reads the session before or after the delete, a retry
 * ends with it after (or finds it gone), the session then takes a turn, and once it is deleted
 * nothing is left.
 */

const S = 's';
const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const assistant = (content: string): Item => ({ type: 'message', role: 'assistant', content });
/** Turns kept, each followed by one a delete took out: every delete forks one generation deeper. */
const DEPTH = 8;

/** A call whose output is stored out of line (a blob of the first generation), before the turns. */
const OUTPUT = `${'output '.repeat(20)}end`;
const CALL: Item[] = [
  { type: 'function_call', call_id: 'c1', name: 'read', arguments: '{}' },
  { type: 'function_call_output', call_id: 'c1', output: OUTPUT },
];
/**
 * Messages appended after the call, in the first generation: none, and more than the turns after
 * it hold, so that the flattening reads that generation as a fork and copies only those above it.
 */
const EARLY = { 'copies every generation': 0, 'copies those above the first': 4 * DEPTH };
export type History = keyof typeof EARLY;
const early = (history: History) => Array.from({ length: EARLY[history] }, (_, index) => `early ${index + 1}`);
const kept = (history: History) => [
  undefined,
  undefined,
  ...early(history),
  ...Array.from({ length: DEPTH + 1 }, (_, index) => [`kept ${index + 1}`, `re kept ${index + 1}`]).flat(),
];

/** The processes of a run on `store`, their clock shared (`late` moves it past a lease). */
function runOn(store: ObjectStore) {
  let offset = 0;
  const clock = () => new Date(Date.now() + offset);
  // Packed as it goes: the flattening reads records and segments of every generation.
  const log = (on: ObjectStore = store) =>
    new SessionLog(on, { clock, leaseMs: LEASE_MS, packMinRecords: 2, keepRecords: 1, blobThreshold: 64 });
  return { store, log, late: () => (offset += LEASE_MS + 1) };
}

/** How long the history set up stays a copy's start: a run's clock is the machine's. */
const TEMPLATE_MS = 1_000;

/**
 * Runs on the history set up once and copied (copyStore), as `start` sets it up: its calls are
 * one at a time and its clock the machine's, so a copy holds what a setup would, up to the random
 * ids a setup draws anew and its times, which are older by at most TEMPLATE_MS (a thirtieth of a
 * lease: a setup's own calls on a loaded machine take as long) and set up again past that.
 */
function startFrom(makeStore: () => Promise<ObjectStore>, history: History) {
  let template: { store: ObjectStore; at: number } | undefined;
  return async () => {
    if (!template || Date.now() - template.at > TEMPLATE_MS) {
      const at = Date.now();
      template = { store: (await start(makeStore, history)).store, at };
    }
    const store = await makeStore();
    await copyStore(template.store, store);
    return runOn(store);
  };
}

async function start(makeStore: () => Promise<ObjectStore>, history: History) {
  const run = runOn(await makeStore());
  const { log } = run;
  await log().create({ id: S });
  await log().append(S, CALL);
  if (EARLY[history] > 0) await log().append(S, early(history).map(user));
  for (let n = 1; n <= DEPTH; n++) {
    await keyedTurn(log(), `kept ${n}`, `key ${n}`);
    await turnOf(log(), S, `gone ${n}`);
    await log().deleteTurn(S, n + 1);
  }
  await keyedTurn(log(), `kept ${DEPTH + 1}`, `key ${DEPTH + 1}`);
  await turnOf(log(), S, 'gone');
  return run;
}

/** A kept turn under an Idempotency-Key (its `idem/` claim is copied by the flattening). */
async function keyedTurn(log: SessionLog, text: string, key: string) {
  const begun = await log.beginTurn(S, { input: [user(text)], idempotencyKey: key });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  await log.completeTurn(begun.turn, { status: 'completed', output: [assistant(`re ${text}`)], receipt: {} });
}

/** What the flattened history keeps beside its records: the out-of-line output, the first turn's key. */
async function expectKept(log: SessionLog, where: string) {
  const page = await log.listItems(S, { limit: 1000 });
  expect(page.items.at(-2), where).toMatchObject({ type: 'function_call_output', output: OUTPUT });
  await expect(log.beginTurn(S, { input: [user('kept 1')], idempotencyKey: 'key 1' }), where).resolves.toMatchObject({
    kind: 'replay',
    turn: 1,
  });
}

const rewind = (log: SessionLog) => attempt(() => log.deleteTurn(S, DEPTH + 2));

/**
 * `timeoutMs`: a bound on the whole run (not a measure), for a store doing real I/O at every crash point.
 * `histories`: the histories it runs (every one by default), so a slow store's can run in files side by side.
 */
export function defineFlattenSimulation(
  name: string,
  makeStore: () => Promise<ObjectStore>,
  timeoutMs?: number,
  histories: readonly History[] = Object.keys(EARLY) as History[],
): void {
  describe(`a delete of the newest turn that flattens the history: ${name}`, () => {
    beforeEach(() => {
      vi.useRealTimers();
    });

    it.each(histories)(
      'crashed at each storage call, before it and after it landed, then retried (%s)',
      async (history) => {
        const AFTER = kept(history);
        const BEFORE = [...AFTER, 'gone', 're gone'];
        const counted = await start(makeStore, history);
        const counter = new InterleavedStore(counted.store, {});
        expect((await rewind(counted.log(counter))).ok).toBe(true);
        const config = JSON.parse(new TextDecoder().decode((await counted.store.get(sessionConfigKey('', S)))!.body));
        // Flattened: it reads no generation of its own, or only the first (one level deep).
        expect(config.named, 'the delete flattens').toBeDefined();
        expect(config.fork_of?.length ?? 0).toBe(EARLY[history] > 0 ? 1 : 0);
        const setUp = startFrom(makeStore, history);
        for (let crash = 1; crash <= counter.calls; crash++) {
          for (const after of [false, true]) {
            const run = await setUp();
            await rewind(run.log(new InterleavedStore(run.store, { crash: { at: crash, after } })));
            const where = `delete crashed at call ${crash} ${after ? 'after' : 'before'} it`;
            expect([BEFORE, AFTER], where).toContainEqual(await contents(run.log(), S));
            // A fence it left holds the session for a lease; a retry then ends with the turn gone.
            run.late();
            const retried = await rewind(run.log());
            if (!retried.ok) expect(retried.code, `${where}: ${(retried.error as Error).message}`).toBe('not_found');
            expect(await contents(run.log(), S), where).toEqual(AFTER);
            await expectKept(run.log(), where);
            await turnOf(run.log(), S, 'next');
            expect(await contents(run.log(), S), where).toEqual([...AFTER, 'next', 're next']);
            for (let round = 0; round < 2; round++) {
              await attempt(() => run.log().delete(S));
              run.late();
            }
            const left = await run.store.list('sessions/', { limit: 1000 });
            expect(
              left.objects.map((object) => object.key),
              where,
            ).toEqual([]);
          }
        }
      },
      timeoutMs,
    );
  });
}
