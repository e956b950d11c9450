import { describe, expect, it } from 'vitest';
import { adoptedView } from '../../lib/session/log/ancestor-view.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readConfig, scopeOf } from '../../lib/session/log/head.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { CountingStore } from '../support/counting-store.ts';
import { SessionLog } from '../support/session-log.ts';

/**
 * A fork's first view starts from its ancestor's newest view at or below the fork point
 * (lib/session/log/ancestor-view.ts), looked for in at most two pages of 100 keys of the
 * ancestor's records listed from the point down, however many records the ancestor holds
 * above it (each a key: a tombstone once packed).
 */

/** Session `p` of 40 + `above` appends, a view every 16 (`viewsUpTo`: none after that one), forked at the 40th. */
async function forked(above: number, viewsUpTo = Number.POSITIVE_INFINITY) {
  const memory = new MemoryStore();
  const log = new SessionLog(memory, { packMinRecords: 2, keepRecords: 1 });
  await log.create({ id: 'p' });
  let at = 0;
  for (let n = 1; n <= 40 + above; n++) {
    const call = { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: `{"n":${n % 7}}` } as const;
    await log.append('p', [call, { type: 'function_call_output', call_id: `c${n}`, output: `o${n}` }]);
    if (n % 16 === 0 && n <= viewsUpTo) await log.pack('p', { refresh: true });
    if (n === 40) at = (await log.get('p')).counts.items;
  }
  await log.fork('p', { at_seq: at, fields: { id: 'f' } });
  const scope = scopeOf('', (await readConfig(logContext(memory, { viewPolicy }), 'f')).config);
  return { memory, scope, point: scope.ancestors![0]! };
}

describe("the ancestor's view a fork's first view starts from", () => {
  it('is looked for in two pages of the records at or below the fork point, not every key above it', async () => {
    const { memory, scope, point } = await forked(600);
    const counting = new CountingStore(memory);
    // The parent keeps its newest two views only: none is left that low.
    expect(await adoptedView(logContext(counting, { viewPolicy }), scope, point)).toBeNull();
    expect(counting.counts.list).toBeLessThanOrEqual(2);
  });

  it('is found below as many records as a page lists above the fork point', async () => {
    const { memory, scope, point } = await forked(250, 40);
    const counting = new CountingStore(memory);
    const view = await adoptedView(logContext(counting, { viewPolicy }), scope, point);
    // The view of the 32nd append, the newest at or below the point.
    expect(view?.record).toBe(32);
    expect(view!.record).toBeLessThanOrEqual(point.record);
    expect(counting.counts.list).toBe(1);
  });

  it('is none when two pages below the point list no view', async () => {
    const memory = new MemoryStore();
    const log = new SessionLog(memory, { packMinRecords: 1000, keepRecords: 1000 });
    await log.create({ id: 'p' });
    await log.append('p', [{ type: 'message', role: 'user', content: 'first' }]);
    await log.pack('p', { refresh: true });
    for (let n = 1; n <= 250; n++) await log.append('p', [{ type: 'message', role: 'user', content: `m${n}` }]);
    await log.fork('p', { at_seq: 240, fields: { id: 'f' } });
    const scope = scopeOf('', (await readConfig(logContext(memory, { viewPolicy }), 'f')).config);
    const counting = new CountingStore(memory);
    expect(await adoptedView(logContext(counting, { viewPolicy }), scope, scope.ancestors![0]!)).toBeNull();
    expect(counting.counts.list).toBeLessThanOrEqual(2);
  });
});
