import { env } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { SessionLog } from '../support/session-log.ts';
import { CountingStore } from '../support/counting-store.ts';
import { R2Store } from '../../lib/store/r2.ts';
import { parseIndexMarker } from '../../lib/session/log/index-markers.ts';
import { defineSessionLogConcurrency } from '../session/session-log-concurrency.ts';

const bucket = (env as { BUCKET: R2Bucket }).BUCKET;

defineSessionLogConcurrency('r2 binding', () => new R2Store(bucket));

describe('SessionLog on the R2 binding', () => {
  it('flattens a history past the generations a config names, its outputs out of line', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const log = new SessionLog(new R2Store(bucket), {
      keyPrefix,
      packMinRecords: 2,
      keepRecords: 1,
      blobThreshold: 64,
    });
    await log.create({ id: 'flat' });
    const step = async (input: Parameters<SessionLog['beginTurn']>[1]['input'], call: string) => {
      const begun = await log.beginTurn('flat', { input });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.completeTurn(begun.turn, {
        status: 'completed',
        output: [{ type: 'function_call', call_id: call, name: 'ls', arguments: '{}' }],
        receipt: {},
      });
    };
    const output = (n: number) => `result ${n} `.repeat(16);
    await step([], 'c0');
    // Two turns kept a round, each answering the call before it (the first of them packed: its output
    // goes out of line under its generation's `blob/`, which the flattening copies); the one after
    // them, deleted, forks one generation deeper.
    for (let n = 1; n <= 10; n++) {
      await step([{ type: 'function_call_output', call_id: `c${n - 1}`, output: output(n) }], `a${n}`);
      await step([{ type: 'function_call_output', call_id: `a${n}`, output: 'b' }], `c${n}`);
      await log.pack('flat');
      await step([{ type: 'function_call_output', call_id: `c${n}`, output: 'gone' }], 'gone');
      await log.deleteTurn('flat', 2 * n + 2);
    }
    const begun = await log.beginTurn('flat', {
      input: [{ type: 'function_call_output', call_id: 'c10', output: 'last' }],
    });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const { items: view } = await log.readContext(begun.turn, { toolCalls: 100, seqs: [] });
    const hydrated = await log.hydrate(begun.turn.scope, view);
    const outputs = hydrated.flatMap((item) => (item.type === 'function_call_output' ? [item.output] : []));
    expect(outputs).toEqual([...Array.from({ length: 10 }, (_, index) => [output(index + 1), 'b']).flat(), 'last']);
    await log.delete('flat');
  });

  it('runs turns, packs, reads the tail with ranges and deletes the session', async () => {
    const keyPrefix = `${crypto.randomUUID()}/`;
    const log = new SessionLog(new R2Store(bucket), {
      keyPrefix,
      packMinRecords: 2,
      keepRecords: 1,
      blobThreshold: 64,
    });
    await log.create({ id: 'r2' });
    for (let i = 0; i < 5; i++) {
      // The first turn has no call to answer.
      const input =
        i === 0
          ? []
          : [{ type: 'function_call_output' as const, call_id: `c${i - 1}`, output: `result ${i} `.repeat(i * 4) }];
      const begun = await log.beginTurn('r2', { input });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.completeTurn(begun.turn, {
        status: 'completed',
        output: [{ type: 'function_call', call_id: `c${i}`, name: 'ls', arguments: '{}' }],
        receipt: {},
      });
      await log.pack('r2');
    }
    const begun = await log.beginTurn('r2', { input: [{ type: 'message', role: 'user', content: 'last' }] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    expect(begun.turn.aggregates).toMatchObject({ tool_calls: 5, tool_outputs: 4 });
    const { items: view } = await log.readContext(begun.turn, { toolCalls: 2, seqs: [] });
    expect(view.map((item) => item.seq)).toEqual([6, 7, 8, 9, 10]);
    const hydrated = await log.hydrate(begun.turn.scope, view);
    expect(hydrated[2]).toMatchObject({ type: 'function_call_output', output: 'result 4 '.repeat(16) });
    const page = await log.listItems('r2', { limit: 4, before: 6 });
    expect(page.items.map((item) => item.seq)).toEqual([5, 4, 3, 2]);
    await log.delete('r2');
    // Only the completion that closed the open turn stays, fencing its late owner, beside the
    // delete's marker in the session index.
    const left = (await bucket.list({ prefix: keyPrefix })).objects.map((object) => object.key);
    const markers = left.filter((key) => parseIndexMarker(keyPrefix, key));
    expect(markers).toHaveLength(1);
    expect(parseIndexMarker(keyPrefix, markers[0]!)?.position).toMatch(/-r2$/);
    const rest = left.filter((key) => !markers.includes(key));
    expect(rest).toHaveLength(1);
    expect(rest[0]).toMatch(/\.done$/);
    await expect(log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} })).rejects.toMatchObject({
      code: 'not_found',
    });
    await expect(log.delete('r2')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('costs at most 8 R2 calls a turn without an inbox, the same as the session grows', async () => {
    const store = new CountingStore(new R2Store(bucket));
    const keyPrefix = `${crypto.randomUUID()}/`;
    const options = { keyPrefix, packMinRecords: 4, keepRecords: 1 };
    await new SessionLog(store, options).create({ id: 'ops' });
    const needs = { requirement: () => ({ toolCalls: 6, seqs: [], wholeCalls: 2 }) };
    const costs: number[] = [];
    for (let i = 0; i < 40; i++) {
      // A log per turn, as the service builds one per request.
      const log = new SessionLog(store, options);
      store.reset();
      const input =
        i === 0
          ? []
          : [{ type: 'function_call_output' as const, call_id: `c${i - 1}`, output: `result ${i} `.repeat(50) }];
      const begun = await log.beginTurn('ops', { input });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      await log.readContext(begun.turn, needs.requirement());
      await log.completeTurn(begun.turn, {
        status: 'completed',
        output: [{ type: 'function_call', call_id: `c${i}`, name: 'ls', arguments: JSON.stringify({ i }) }],
        receipt: {},
      });
      costs.push(store.operations);
      await log.pack('ops', needs);
    }
    // get config, list, get record and completion, get view; put record and completion. The view
    // holds its call keys inline (the repeat index's delta, 40 keys): no shard is read for them.
    expect(Math.max(...costs)).toBeLessThanOrEqual(8);
    expect(Math.max(...costs.slice(30))).toBe(Math.max(...costs.slice(10, 20)));
  });
});
