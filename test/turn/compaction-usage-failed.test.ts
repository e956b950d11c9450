import { describe, expect, it } from 'vitest';
import { TokenSpend } from '../../lib/ledger/token-spend.ts';
import { ModelError, ModelTimeoutError } from '../../lib/models/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimBackgroundTurn, runBackgroundTurn, runTurn, type TurnServices } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A turn that compacts (its summary made, its context start stored) and then fails at its own
// model call: the context start stays moved, so the summary is charged, as no turn, to the
// session's totals in the failed completion and to the token that took the turn
// (docs/CONFIGURATION.md, "What a session spent").

/** A session of three turns whose model fails, once `fail()` is called, on the call after a summary. */
async function compactingWorld(failure: 'call' | 'summary timeout' = 'call') {
  let calls = 0;
  let failing = false;
  const model = hookedEcho('echo', async () => {
    calls++;
    if (failing && failure === 'call' && calls === 2) throw new ModelError('provider down', { model: 'echo' });
    if (failing && failure === 'summary timeout' && calls === 1) throw new ModelTimeoutError('no answer in time');
  });
  const store = new MemoryStore();
  const world = turnWorld(store, model);
  await world.sessions.create({ id: 's', model: 'echo' });
  return {
    ...world,
    store,
    calls: () => calls,
    fail: () => {
      calls = 0;
      failing = true;
    },
  };
}

/** A request whose window's trigger and kept share are a few tokens: it summarizes all but its input. */
const COMPACTING = {
  input: 'four',
  strategies: ['compact'],
  strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
};

describe('a compacting turn whose model call fails', () => {
  it('charges the summary it made to the session, as no turn', async () => {
    const { services, sessions, calls, fail } = await compactingWorld();
    for (const input of ['one', 'two', 'three']) await runTurn(services, 's', { input });
    const before = (await sessions.get('s')).usage;
    fail();
    await expect(runTurn(services, 's', COMPACTING)).rejects.toMatchObject({ code: 'model_error' });
    expect(calls()).toBe(2);
    expect(await sessions.currentContext('s')).not.toBeNull();
    const after = (await sessions.get('s')).usage;
    expect(after.turns).toBe(before.turns);
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
    expect(after.output_tokens).toBeGreaterThan(before.output_tokens);
  });

  it("shows it in the failed turn's receipt, as a completed turn's compaction_usage", async () => {
    const { services, sessions, fail } = await compactingWorld();
    for (const input of ['one', 'two', 'three']) await runTurn(services, 's', { input });
    const before = (await sessions.get('s')).usage;
    fail();
    await expect(runTurn(services, 's', COMPACTING)).rejects.toMatchObject({ code: 'model_error' });
    const after = (await sessions.get('s')).usage;
    const receipt = await sessions.getTurn('s', 4);
    expect(receipt.status).toBe('failed');
    expect(receipt.usage).toBeNull();
    expect(receipt.compaction_usage?.input_tokens).toBe(after.input_tokens - before.input_tokens);
    expect(receipt.compaction_usage?.output_tokens).toBe(after.output_tokens - before.output_tokens);
    const listed = (await sessions.listTurns('s', { limit: 1 })).turns[0];
    expect(listed?.compaction_usage).toEqual(receipt.compaction_usage);
  });

  it("charges it to the budgeted token a background turn's record names", async () => {
    const { services: base, sessions, store, calls, fail } = await compactingWorld();
    const tasks: Promise<unknown>[] = [];
    const budget = { id: 'b'.repeat(32), expires: Math.floor(Date.now() / 1000) + 3600, limits: { max_turns: 100 } };
    const token = new TokenSpend(store, '', budget);
    const background = (task: Promise<unknown>) => void tasks.push(task);
    // The request's services (a budgeted token) and the runner's (no token: spendOf), as in functions/services.ts.
    const requestServices: TurnServices = { ...base, tokenSpend: token, background };
    const runnerServices: TurnServices = { ...base, spendOf: (named) => new TokenSpend(store, '', named), background };
    const drain = async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    };
    for (const input of ['one', 'two', 'three']) await runTurn(requestServices, 's', { input });
    await drain();
    const before = await token.read();
    expect(before.turns).toBe(3);
    fail();
    const claimed = await claimBackgroundTurn(requestServices, 's', COMPACTING);
    expect(await runBackgroundTurn(runnerServices, claimed.run!)).toBe('done');
    await drain();
    expect(calls()).toBe(2);
    expect((await sessions.getTurn('s', claimed.turn)).status).toBe('failed');
    const after = await token.read();
    expect(after.turns).toBe(before.turns);
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
  });
});

// A summary call that timed out was worked on and billed by its provider, which reported nothing:
// the failed turn charges the summary prompt's tokens, estimated (no output), as its summary's.
describe('a compacting turn whose summary call times out', () => {
  it('charges its estimate to the session, its receipt and its token, as no turn', async () => {
    const { services: base, sessions, store, fail } = await compactingWorld('summary timeout');
    const tasks: Promise<unknown>[] = [];
    const budget = { id: 'c'.repeat(32), expires: Math.floor(Date.now() / 1000) + 3600, limits: { max_turns: 100 } };
    const token = new TokenSpend(store, '', budget);
    const services: TurnServices = { ...base, tokenSpend: token, background: (task) => void tasks.push(task) };
    const drain = async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    };
    for (const input of ['one', 'two', 'three']) await runTurn(services, 's', { input });
    await drain();
    const before = (await sessions.get('s')).usage;
    const spentBefore = await token.read();
    fail();
    await expect(runTurn(services, 's', COMPACTING)).rejects.toMatchObject({ code: 'model_timeout' });
    await drain();
    expect(await sessions.currentContext('s')).toBeNull();
    const after = (await sessions.get('s')).usage;
    expect(after.turns).toBe(before.turns);
    expect(after.output_tokens).toBe(before.output_tokens);
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
    const receipt = await sessions.getTurn('s', 4);
    expect(receipt).toMatchObject({ status: 'failed', usage: null });
    expect(receipt.compaction_usage).toMatchObject({
      input_tokens: after.input_tokens - before.input_tokens,
      output_tokens: 0,
    });
    const spent = await token.read();
    expect(spent.turns).toBe(spentBefore.turns);
    expect(spent.input_tokens - spentBefore.input_tokens).toBe(after.input_tokens - before.input_tokens);
  });
});
