import { describe, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewsAfterEachPackCrash } from '../support/log-views.ts';
import { SessionLog, type SessionLogOptions } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * A fork's first view made from its ancestor's (lib/session/log/ancestor-view.ts), the objects
 * that view names copied under the fork's generation: whatever a crash at any storage call of
 * that pack left, a process that never saw the session reads what the log itself gives, and so
 * after the next pack.
 */

// Shards of the repeat index every few keys (the view adopted names sets), chunks of a few items.
const options: Partial<SessionLogOptions> = {
  indexDeltaKeys: 4,
  viewChunkBytes: 300,
  packMinRecords: 2,
  keepRecords: 1,
};
const requirement = () => ({ toolCalls: 3, seqs: [], wholeCalls: 2 });

function record(n: number): Item[] {
  return [
    { type: 'message', role: 'user', content: `message ${n}` },
    ...[`p${n}`, `p${n % 5}`].flatMap((path, index): Item[] => [
      { type: 'function_call', call_id: `c${n}-${index}`, name: 'read', arguments: JSON.stringify({ path }) },
      { type: 'function_call_output', call_id: `c${n}-${index}`, output: `out ${n} ${index}` },
    ]),
  ];
}

describe("a fork's first view from its ancestor's", () => {
  it('reads as the log itself after its pack crashed at any storage call, before or after it lands', async () => {
    const template = new MemoryStore();
    const log = new SessionLog(template, options);
    await log.create({ id: 's' });
    for (let n = 1; n <= 24; n++) await log.append('s', record(n));
    await log.pack('s', { requirement, refresh: true });
    for (let n = 25; n <= 30; n++) await log.append('s', record(n));
    await turnOf(log, 's', 'kept');
    await turnOf(log, 's', 'gone');
    await log.deleteTurn('s', (await log.get('s')).counts.turns);
    // And a turn after the next pack reads the history whole.
    await previewsAfterEachPackCrash(
      template,
      (store) => new SessionLog(store, options),
      requirement,
      { requirement, refresh: true },
      (crashed) => turnOf(crashed, 's', 'next'),
    );
  });
});
