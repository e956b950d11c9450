import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import type { Summarize } from '../../lib/session/log/compaction.ts';
import { listAll, type ObjectStore } from '../../lib/store/object-store.ts';
import { faultyLogs } from '../support/faulty-logs.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';

// A manual compaction claims its session before its summary's model call (a `compact` record with
// a lease, lib/session/log/compaction-claim.ts): compactions and turns racing it are refused with
// turn_in_progress before any model call, a spent budget refuses it (budget_exhausted), and every summary made is
// charged to the session's totals exactly once, whichever storage call of the compaction fails.

const LEASE_MS = 1000;
// Long enough that no compaction of a loaded machine renews its claim (a renewal, every third of
// the lease in real time, is a put and a get): the crash test counts a compaction's storage calls
// and fails each in turn. It moves the clock past the lease instead of waiting.
const CRASH_LEASE_MS = 30_000;
const SUMMARY = {
  input_tokens: 100,
  cached_input_tokens: 0,
  cache_write_tokens: 0,
  output_tokens: 7,
  reasoning_tokens: 0,
  cost_usd: 0,
};
const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const stores = await memoryAndFileStores('compaction-claim');

function setup(inner: ObjectStore, leaseMs = LEASE_MS) {
  const logs = faultyLogs(inner, leaseMs);
  const { log } = logs;
  let calls = 0;
  /** Summarizes all but the newest item, claiming first; `before` runs in its model call. */
  const summarizer =
    (before: () => Promise<void> = async () => {}): Summarize =>
    async ({ items }, claim) => {
      const start = items.at(-1)!.seq!;
      const first = items[0]!.seq!;
      if (start === first) return null;
      await claim();
      calls++;
      await before();
      const context = { start_seq: start, summary: 's', interrupted: [], model: 'm' };
      return { context: { ...context, summarized: { first_seq: first, last_seq: start - 1 } }, usage: SUMMARY };
    };
  const create = async (budget?: { max_total_tokens: number }) => {
    await log.create({ id: 's1', ...(budget && { budget }) });
    await log.append('s1', [user('a'), user('b'), user('c')]);
  };
  /** A completed turn of `input`, answered `output`. */
  const turn = async (input: string, output: string) => {
    const begun = await log.beginTurn('s1', { input: [user(input)] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    await log.completeTurn(begun.turn, { status: 'completed', output: [user(output)], receipt: {} });
  };
  /** A compaction whose model call waits for `release`, once it `started`. */
  const holding = async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let summarizing!: () => void;
    const started = new Promise<void>((resolve) => (summarizing = resolve));
    const running = log.compact(
      's1',
      summarizer(async () => {
        summarizing();
        await held;
      }),
    );
    await started;
    return { running, release };
  };
  return {
    ...logs,
    summarizer,
    create,
    turn,
    holding,
    calls: () => calls,
    totals: async () => (await log.get('s1')).usage,
  };
}

describe.each(stores)('a manual compaction claims its session: %s', (_, storeOf) => {
  it('of 8 compactions at once one calls the model; the others are refused first, and it is charged', async () => {
    const world = setup(storeOf());
    await world.create();
    let refused = 0;
    let entered = 0;
    let open!: () => void;
    const othersDone = new Promise<void>((resolve) => (open = resolve));
    const answered = () => refused + entered === 8 && open();
    // A model call waits until every compaction was refused or called the model.
    const summarize = world.summarizer(() => {
      entered++;
      answered();
      return othersDone;
    });
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, index) =>
        (index % 2 === 0 ? world.log : world.other).compact('s1', summarize).catch((error: unknown) => {
          refused++;
          answered();
          throw error;
        }),
      ),
    );
    expect(world.calls()).toBe(1);
    const rejected = results.flatMap((result) => (result.status === 'rejected' ? [result.reason] : []));
    expect(rejected).toHaveLength(7);
    for (const reason of rejected) expect(reason).toMatchObject({ code: 'turn_in_progress' });
    expect(await world.totals()).toMatchObject({ input_tokens: 100, output_tokens: 7 });
    // The session is free again, at once.
    await world.other.append('s1', [user('d')]);
  });

  it('a turn, an append or another compaction is refused while a compaction runs, and goes after it', async () => {
    const world = setup(storeOf());
    await world.create();
    const { running, release } = await world.holding();
    await expect(world.other.beginTurn('s1', { input: [user('t')] })).rejects.toMatchObject({
      code: 'turn_in_progress',
    });
    await expect(world.other.append('s1', [user('x')])).rejects.toMatchObject({ code: 'turn_in_progress' });
    await expect(world.other.compact('s1', world.summarizer())).rejects.toMatchObject({ code: 'turn_in_progress' });
    release();
    expect(await running).toMatchObject({ compacted: true, context: { start_seq: 3 } });
    expect(world.calls()).toBe(1);
    expect(await world.other.beginTurn('s1', { input: [user('t')] })).toMatchObject({ kind: 'claimed' });
  });

  it('a spent budget refuses a compaction before its model call', async () => {
    const world = setup(storeOf());
    await world.create({ max_total_tokens: 100 });
    await world.log.compact('s1', world.summarizer());
    await world.log.append('s1', [user('d'), user('e')]);
    await expect(world.log.compact('s1', world.summarizer())).rejects.toMatchObject({ code: 'budget_exhausted' });
    expect(world.calls()).toBe(1);
    expect(await world.totals()).toMatchObject({ input_tokens: 100, output_tokens: 7 });
  });

  it('a compaction whose newest turn was deleted before its claim claims the session as it is now', async () => {
    const world = setup(storeOf());
    await world.create();
    await world.log.append('s1', [user('d')]);
    await world.turn('e', 'f');
    let deleted = false;
    const summarize = world.summarizer();
    // The newest turn is deleted between the compaction's read and its claim: the session's new
    // generation starts with a record numbered as the turn's was.
    const compacted = await world.log.compact('s1', async (view, claim) => {
      if (!deleted) {
        deleted = true;
        await world.other.deleteTurn('s1', 1);
      }
      return summarize(view, claim);
    });
    expect(compacted).toMatchObject({ compacted: true, made_of: { turns: 0, items: 4 } });
    expect(world.calls()).toBe(1);
    expect(await world.totals()).toMatchObject({ input_tokens: 100, output_tokens: 7 });
    // Nothing holds the session after it.
    await world.other.append('s1', [user('g')]);
  });

  it('a compaction whose session moves on before every claim is turn_in_progress, nothing stored', async () => {
    const world = setup(storeOf());
    await world.create();
    const summarize = world.summarizer();
    let appends = 0;
    // Another writer's append lands between each of the compaction's reads and its claim.
    const refused = await world.log
      .compact('s1', async (view, claim) => {
        appends++;
        await world.other.append('s1', [user(`moved ${appends}`)]);
        return summarize(view, claim);
      })
      .catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'turn_in_progress', details: { session_id: 's1' } });
    expect(appends).toBe(3);
    expect(world.calls()).toBe(0);
    expect(await world.totals()).toMatchObject({ input_tokens: 0, output_tokens: 0 });
    // Nothing holds the session: the next compaction goes through.
    expect(await world.log.compact('s1', summarize)).toMatchObject({ compacted: true });
  });

  it('a delete of the newest turn is refused while a compaction makes its summary', async () => {
    const world = setup(storeOf());
    await world.create();
    await world.turn('d', 'e');
    const { running, release } = await world.holding();
    await expect(world.other.deleteTurn('s1', 1)).rejects.toMatchObject({ code: 'turn_in_progress' });
    release();
    expect(await running).toMatchObject({ compacted: true });
    expect(world.calls()).toBe(1);
  });

  it('a compaction whose model call failed, or whose process died, leaves the newest turn deletable', async () => {
    for (const ending of ['failed', 'died'] as const) {
      const world = setup(storeOf());
      await world.create();
      await world.turn('d', 'e');
      const summarize = world.summarizer(async () => {
        throw new Error('the model is down');
      });
      // A compaction that died: its claim stays, unreleased, past its lease.
      const died: Summarize = async (view, claim) => {
        await claim();
        world.store.failWhen(() => true);
        return summarize(view, claim);
      };
      await expect(world.log.compact('s1', ending === 'failed' ? summarize : died)).rejects.toThrow();
      world.store.heal();
      world.advance(3 * LEASE_MS);
      expect(await world.other.deleteTurn('s1', 1), ending).toMatchObject({ counts: { turns: 0, items: 3 } });
    }
    // One that moved the context still keeps the turn before it.
    const world = setup(storeOf());
    await world.create();
    await world.turn('d', 'e');
    await world.log.compact('s1', world.summarizer());
    await expect(world.other.deleteTurn('s1', 1)).rejects.toThrow(/a compaction came after it/);
  });

  it('a summary whose claim lapsed under a turn or another compaction is charged once, by the next write', async () => {
    for (const passer of ['turn', 'compaction'] as const) {
      const world = setup(storeOf());
      await world.create();
      const { running, release } = await world.holding();
      // Its renewals fail for a whole lease: the claim lapses, and another writer takes the session.
      world.store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.lease'));
      world.advance(3 * LEASE_MS);
      let ended: Promise<unknown>;
      let other!: () => void;
      if (passer === 'turn') {
        const begun = await world.other.beginTurn('s1', { input: [user('t')] });
        if (begun.kind !== 'claimed') throw new Error('expected a claim');
        ended = new Promise<void>((resolve) => (other = resolve)).then(() =>
          world.other.completeTurn(begun.turn, { status: 'completed', output: [user('u')], receipt: {} }),
        );
      } else {
        let started!: () => void;
        const summarizing = new Promise<void>((resolve) => (started = resolve));
        const held = new Promise<void>((resolve) => (other = resolve));
        ended = world.other.compact(
          's1',
          world.summarizer(async () => {
            started();
            await held;
          }),
        );
        await summarizing;
      }
      world.store.heal();
      // The lapsed compaction's record is refused by the other holder: its summary was made all the same.
      release();
      await expect(running, passer).rejects.toMatchObject({ code: 'turn_in_progress' });
      other();
      await ended;
      expect(world.calls(), passer).toBe(passer === 'turn' ? 1 : 2);
      await world.other.append('s1', [user('d')]);
      expect(await world.totals(), passer).toMatchObject({ input_tokens: 100 * world.calls() });
    }
  });

  it('a summary its own record charged after an append passed its lapsed claim over is charged once', async () => {
    const world = setup(storeOf());
    await world.create();
    const { running, release } = await world.holding();
    world.store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.lease'));
    world.advance(3 * LEASE_MS);
    // An append passes the lapsed claim over, naming it unbilled; the compaction's own record lands after it.
    await world.other.append('s1', [user('d')]);
    world.store.heal();
    // Its record lands, but the compaction never learns it: its log's calls fail from then on (the
    // spend object and the config excepted), so it stores its summary's usage for the claim as well.
    let landed = false;
    world.store.failWhen(
      (call) => {
        if (landed) return call.key.includes('/turn/');
        landed =
          call.operation === 'put' && call.options?.onlyIfAbsent === true && /\/turn\/[^/]*\/\d+$/.test(call.key);
        return landed;
      },
      { after: true },
    );
    release();
    await expect(running).rejects.toThrow();
    world.store.heal();
    await world.other.append('s1', [user('e')]);
    expect(world.calls()).toBe(1);
    expect(await world.totals()).toMatchObject({ input_tokens: 100 });
  });

  it('a summary whose lapsed claim a delete of the newest turn passed over is charged once', async () => {
    const world = setup(storeOf());
    await world.create();
    await world.turn('d', 'e');
    const { running, release } = await world.holding();
    world.store.failWhen(({ operation, key }) => operation === 'put' && key.endsWith('.lease'));
    world.advance(3 * LEASE_MS);
    await world.other.deleteTurn('s1', 1);
    world.store.heal();
    release();
    // Its summary held the deleted turn: not stored, and the compaction starts again, charged by its record.
    expect(await running).toMatchObject({ compacted: true, made_of: { turns: 0 } });
    expect(world.calls()).toBe(2);
    await world.other.append('s1', [user('f')]);
    expect(await world.totals()).toMatchObject({ input_tokens: 200 });
  });

  it('a delete of the session while a compaction makes its summary leaves no lease of its claim behind', async () => {
    const world = setup(storeOf());
    await world.create();
    const { running, release } = await world.holding();
    await world.other.delete('s1');
    // A renewal of the claim's lease after the delete's sweep.
    let renewing!: () => void;
    const renewal = new Promise<void>((resolve) => (renewing = resolve));
    world.store.failWhen(({ operation, key }) => {
      if (operation === 'put' && key.endsWith('.lease')) renewing();
      return false;
    });
    await renewal;
    release();
    await expect(running).rejects.toMatchObject({ code: 'not_found' });
    world.store.heal();
    const left = await listAll(world.store, 'sessions/s1/');
    expect(left.map((object) => object.key).filter((key) => key.endsWith('.lease'))).toEqual([]);
  });

  it('a delete of the session while a compaction makes its summary leaves nothing of it behind', async () => {
    const world = setup(storeOf());
    await world.create();
    const { running, release } = await world.holding();
    await world.other.delete('s1');
    // The summary is put after the delete's sweep passed: its compaction, refused, takes it out again.
    release();
    await expect(running).rejects.toMatchObject({ code: 'not_found' });
    expect((await listAll(world.store, 'sessions/s1/')).map((object) => object.key)).toEqual([]);
  });

  it('whichever storage call of a compaction fails, the session goes on, charged once per summary made', async () => {
    const probe = setup(storeOf(), CRASH_LEASE_MS);
    await probe.create();
    let total = 0;
    probe.store.failWhen(() => {
      total++;
      return false;
    });
    await probe.log.compact('s1', probe.summarizer());
    expect(total).toBeGreaterThan(5);
    for (let k = 1; k <= total; k++) {
      for (const after of [false, true]) {
        const world = setup(storeOf(), CRASH_LEASE_MS);
        await world.create();
        world.failAt(k, after);
        await world.log.compact('s1', world.summarizer()).catch(() => undefined);
        world.store.heal();
        const label = `call ${k}, ${after ? 'after' : 'before'}`;
        // A claim left behind holds the session for its lease, no longer.
        world.advance(3 * CRASH_LEASE_MS);
        await world.other.append('s1', [user('d'), user('e')]);
        expect(await world.totals(), label).toMatchObject({ input_tokens: 100 * world.calls() });
        const calls = world.calls();
        await world.other.compact('s1', world.summarizer());
        expect(world.calls(), label).toBe(calls + 1);
        expect(await world.totals(), label).toMatchObject({ input_tokens: 100 * world.calls() });
      }
    }
  });
});
