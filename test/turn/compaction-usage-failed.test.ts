import { describe, expect, it } from 'vitest';
import { ModelError } from '../../lib/models/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A turn that compacts (its summary made, its context start stored) and then fails at its own
// model call: the context start stays moved, so the summary is charged to the session's totals
// in the failed completion (docs/CONFIGURATION.md, "What a session spent").
describe('a compacting turn whose model call fails', () => {
  it('charges the summary it made to the session, as no turn', async () => {
    let calls = 0;
    let failMain = false;
    const model = hookedEcho('echo', async () => {
      calls++;
      // The turn's second model call (its answer, after the summary) fails.
      if (failMain && calls === 2) throw new ModelError('provider down');
    });
    const { services, sessions } = turnWorld(new MemoryStore(), model);
    await sessions.create({ id: 's', model: 'echo' });
    for (const input of ['one', 'two', 'three']) await runTurn(services, 's', { input });
    const before = (await sessions.get('s')).usage;
    calls = 0;
    failMain = true;
    await expect(
      runTurn(services, 's', {
        input: 'four',
        strategies: ['compact'],
        strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
      }),
    ).rejects.toMatchObject({ code: 'model_error' });
    expect(calls).toBe(2);
    expect(await sessions.currentContext('s')).not.toBeNull();
    const after = (await sessions.get('s')).usage;
    expect(after.turns).toBe(before.turns);
    expect(after.input_tokens).toBeGreaterThan(before.input_tokens);
    expect(after.output_tokens).toBeGreaterThan(before.output_tokens);
  });
});
