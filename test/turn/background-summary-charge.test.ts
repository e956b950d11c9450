import { describe, expect, it } from 'vitest';
import { TokenSpend } from '../../lib/ledger/token-spend.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimBackgroundTurn, runBackgroundTurn, runTurn, type TurnServices } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A budgeted token's background turn that compacts and then fails at its own model call: the
// summary is charged to the token its record names (the runner's services carry no token), as
// a completed background turn's usage is.
describe("a budgeted token's background compacting turn whose model call fails", () => {
  it('charges the summary it made to the token, as no turn', async () => {
    let calls = 0;
    let failMain = false;
    const model = hookedEcho('echo', async () => {
      calls++;
      if (failMain && calls === 2) throw new ModelError('provider down');
    });
    const store = new MemoryStore();
    const { services: base, sessions } = turnWorld(store, model);
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
    await sessions.create({ id: 's', model: 'echo' });
    for (const input of ['one', 'two', 'three']) await runTurn(requestServices, 's', { input });
    await drain();
    const before = await token.read();
    expect(before.turns).toBe(3);
    calls = 0;
    failMain = true;
    const claimed = await claimBackgroundTurn(requestServices, 's', {
      input: 'four',
      strategies: ['compact'],
      strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
    });
    expect(await runBackgroundTurn(runnerServices, claimed.run!)).toBe('done');
    await drain();
    expect(calls).toBe(2);
    expect((await sessions.getTurn('s', claimed.turn)).status).toBe('failed');
    const after = await token.read();
    expect(after.turns).toBe(before.turns);
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
  });
});
