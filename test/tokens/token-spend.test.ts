import { describe, expect, it } from 'vitest';
import { TurnInProgressError } from '../../lib/errors.ts';
import { spendKey, sweepTokenSpend, TokenSpend, type TokenBudget } from '../../lib/ledger/token-spend.ts';
import { addToLedger, EMPTY_LEDGER, type TurnUsage } from '../../lib/ledger/usage.ts';
import { budgetRemaining } from '../../lib/ledger/budget.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { takeUnderPolicy } from '../../lib/turn/busy.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A scoped token's spend record (lib/ledger/token-spend.ts): exact under concurrent charges,
// checked before the claim so a spent token stores nothing and calls no model, never used by
// a queued input, and swept once the token expired.

const USAGE: TurnUsage = {
  input_tokens: 100,
  cached_input_tokens: 40,
  cache_write_tokens: 10,
  output_tokens: 7,
  reasoning_tokens: 2,
  cost_usd: 0.000123,
};

function budget(limits: TokenBudget['limits'], expires = 2_000_000_000): TokenBudget {
  return { id: crypto.randomUUID().replaceAll('-', ''), expires, limits };
}

describe('token spend', () => {
  it('refuses a charge whose totals its reads would refuse, keeping what was spent', async () => {
    const spend = new TokenSpend(new MemoryStore(), 'p/', budget({ max_turns: 1 }));
    await spend.charge(USAGE);
    // Read back as nothing spent, such a record would lift the token's limits.
    await expect(spend.charge({ ...USAGE, input_tokens: 0.5 })).rejects.toThrow(/invariant/);
    await expect(spend.charge({ ...USAGE, output_tokens: -8 })).rejects.toThrow(/invariant/);
    expect(await spend.read()).toEqual(addToLedger(EMPTY_LEDGER, USAGE));
    expect(() => spend.check(addToLedger(EMPTY_LEDGER, USAGE))).toThrow();
  });

  it("charges over what its read found with one put, and reads again when another's charge came between", async () => {
    const store = new CountingStore(new MemoryStore());
    const token = budget({ max_turns: 10 });
    const [spend, other] = [new TokenSpend(store, '', token), new TokenSpend(store, '', token)];
    for (const expected of [1, 2]) {
      await spend.read();
      store.reset();
      expect((await spend.charge(USAGE)).turns).toBe(expected);
      expect([store.counts.get, store.counts.put]).toEqual([0, 1]);
    }
    await spend.read();
    await other.charge(USAGE);
    store.reset();
    expect((await spend.charge(USAGE)).turns).toBe(4);
    // The put over the stale etag refused, then a get and the put.
    expect([store.counts.get, store.counts.put]).toEqual([1, 2]);
  });

  it('takes back the turn its last charge counted with one put, usage left; none charged: nothing', async () => {
    const store = new CountingStore(new MemoryStore());
    const token = budget({ max_turns: 10 });
    const [spend, other] = [new TokenSpend(store, '', token), new TokenSpend(store, '', token)];
    await other.takeBackTurn();
    expect(await other.read()).toEqual(EMPTY_LEDGER);
    await spend.charge(USAGE);
    store.reset();
    await spend.takeBackTurn();
    expect([store.counts.get, store.counts.put]).toEqual([0, 1]);
    expect(await spend.read()).toEqual({ ...addToLedger(EMPTY_LEDGER, USAGE), turns: 0 });
    // Charged by another meanwhile: a get and another put, that turn kept.
    await spend.charge(USAGE);
    await other.charge(USAGE);
    await spend.takeBackTurn();
    expect((await spend.read()).turns).toBe(1);
    // A record that counts no turn is left as it is: the totals never count fewer than none.
    const none = new TokenSpend(store, '', budget({ max_turns: 10 }));
    await none.charge(USAGE, 0);
    await expect(none.takeBackTurn()).rejects.toThrow(/invariant/);
    expect((await none.read()).turns).toBe(0);
  });

  it('hands a charge awaited before its answer to the background too, so no gone client cuts it short', async () => {
    const spend = new TokenSpend(new MemoryStore(), 'p/', budget({ max_turns: 10 }));
    const handed: Promise<unknown>[] = [];
    const logged: string[] = [];
    const services = {
      log: (message: string) => logged.push(message),
      background: (task: Promise<unknown>) => handed.push(task),
    };
    const charged = spend.chargeNow(services, USAGE);
    expect(handed).toHaveLength(1);
    await handed[0];
    expect((await spend.read()).turns).toBe(1);
    await charged;
    expect(logged).toEqual([]);
  });

  it('counts every one of many concurrent charges exactly', async () => {
    const spend = new TokenSpend(new MemoryStore(), 'p/', budget({ max_turns: 1000 }));
    await Promise.all(Array.from({ length: 40 }, () => spend.charge(USAGE)));
    expect(await spend.read()).toEqual({
      turns: 40,
      input_tokens: 4000,
      cached_input_tokens: 1600,
      cache_write_tokens: 400,
      output_tokens: 280,
      reasoning_tokens: 80,
      cost_usd: 0.00492,
      unpriced_turns: 0,
    });
  });

  it('a record it did not write (not JSON, not its shape) is nothing spent, and a charge replaces it', async () => {
    for (const body of ['{"ledger": 5', '{"ledger": {"turns": "many"}}', new Uint8Array([0xff, 0xfe])]) {
      const store = new MemoryStore();
      const token = budget({ max_turns: 10 });
      await store.put(spendKey('', token), body);
      const spend = new TokenSpend(store, '', token);
      expect((await spend.read()).turns).toBe(0);
      await spend.charge(USAGE);
      expect((await spend.read()).turns).toBe(1);
    }
  });

  it('a spent token is refused at the claim: no model called, nothing stored', async () => {
    const store = new MemoryStore();
    let calls = 0;
    const { sessions, services } = turnWorld(
      store,
      hookedEcho('echo', async () => {
        calls += 1;
      }),
    );
    await sessions.create({ id: 's' });
    const spend = new TokenSpend(store, '', budget({ max_total_tokens: 107 }));
    await spend.charge(USAGE);
    const before = await sessions.get('s');
    await expect(runTurn({ ...services, tokenSpend: spend }, 's', { input: 'over' })).rejects.toMatchObject({
      code: 'budget_exhausted',
      details: { budget: 'token', limit: 'max_total_tokens', spent: 107, value: 107 },
    });
    expect(calls).toBe(0);
    expect((await sessions.get('s')).counts).toEqual(before.counts);
    // Under the limit, the turn runs.
    const roomy = new TokenSpend(store, '', budget({ max_total_tokens: 108 }));
    await roomy.charge(USAGE);
    expect((await runTurn({ ...services, tokenSpend: roomy }, 's', { input: 'ok' })).turn).toBe(1);
    expect(calls).toBe(1);
  });

  it("a budgeted token's input is never queued: a busy session answers 409", async () => {
    const store = new MemoryStore();
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { sessions, services } = turnWorld(
      store,
      hookedEcho('echo', () => held),
    );
    await sessions.create({ id: 'q', on_busy: 'enqueue' });
    const running = runTurn(services, 'q', { input: 'hold' });
    await expect.poll(async () => (await sessions.get('q')).counts.items).toBe(1);
    const spend = new TokenSpend(store, '', budget({ max_turns: 10 }));
    const request = { input: 'later' };
    const take = (withSpend: typeof services) => () => runTurn(withSpend, 'q', request);
    const budgeted = { ...services, tokenSpend: spend };
    await expect(takeUnderPolicy(budgeted, 'q', request, {}, take(budgeted))).rejects.toBeInstanceOf(
      TurnInProgressError,
    );
    expect(await sessions.queued(await sessions.scope('q'))).toEqual([]);
    // Without a budget the same request is queued.
    expect(await takeUnderPolicy(services, 'q', request, {}, take(services))).toMatchObject({ kind: 'queued' });
    release();
    await running;
  });

  it('the sweep deletes the records of expired tokens only', async () => {
    const store = new MemoryStore();
    const now = new Date('2030-01-01T00:00:00Z');
    const seconds = now.getTime() / 1000;
    const expired = budget({ max_turns: 1 }, seconds - 1);
    const valid = budget({ max_turns: 1 }, seconds + 3600);
    for (const each of [expired, valid]) await new TokenSpend(store, 'p/', each).charge(USAGE);
    await store.put('other/token-spend/0000000000-x', '{}');
    expect(await sweepTokenSpend(store, 'p/', now)).toBe(1);
    expect(await store.head(spendKey('p/', expired))).toBeNull();
    expect(await store.head(spendKey('p/', valid))).not.toBeNull();
    expect(await store.head('other/token-spend/0000000000-x')).not.toBeNull();
  });
});

describe('budgetRemaining (GET /v1/tokens/current)', () => {
  it('is each limit the budget sets less what was spent, costs rounded as stored, 0 once reached', () => {
    const ledger = addToLedger(addToLedger(EMPTY_LEDGER, { ...USAGE, cost_usd: 0.1 }), { ...USAGE, cost_usd: 0.2 });
    expect(budgetRemaining({ max_cost_usd: 0.5, max_total_tokens: 1000 }, ledger)).toEqual({
      max_cost_usd: 0.2,
      max_total_tokens: 1000 - 2 * 107,
    });
    expect(budgetRemaining({ max_turns: 2, max_cost_usd: 0.3 }, ledger)).toEqual({ max_turns: 0, max_cost_usd: 0 });
    expect(budgetRemaining({ max_total_tokens: 100 }, ledger)).toEqual({ max_total_tokens: 0 });
  });
});
