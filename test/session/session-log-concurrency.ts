import { describe, expect, it } from 'vitest';
import { TurnInProgressError } from '../../lib/errors.ts';
import { QueuedInputTakenError, QueuedWithdrawnError } from '../../lib/session/log/queue-withdraw.ts';
import type { Item } from '../../lib/items.ts';
import { SessionLog } from '../support/session-log.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';

/**
 * Concurrency on one session, run against every ObjectStore adapter (memory here, S3 on
 * fauxqs in the node project, the R2 binding in workerd): racing claims leave exactly one
 * open turn, racing appends lose and duplicate nothing and keep seq dense, a queued input raced
 * by its withdraw and its pickup's mark (both if-match rewrites) is withdrawn or marked.
 */
export function defineSessionLogConcurrency(
  name: string,
  makeStore: () => ObjectStore,
  options: { writers?: number } = {},
): void {
  const writers = options.writers ?? 8;
  const fresh = () => `c${crypto.randomUUID().replaceAll('-', '').slice(0, 20)}`;

  describe(`SessionLog concurrency (${name})`, () => {
    it(`leaves exactly one open turn when ${writers} claims race`, async () => {
      const store = makeStore();
      const log = new SessionLog(store, { keyPrefix: `${fresh()}/` });
      const id = fresh();
      await log.create({ id });
      const results = await Promise.allSettled(
        Array.from({ length: writers }, (_, i) =>
          log.beginTurn(id, { input: [{ type: 'message', role: 'user', content: `claim ${i}` }] }),
        ),
      );
      const claimed = results.filter((result) => result.status === 'fulfilled');
      const refused = results.filter((result) => result.status === 'rejected');
      expect(claimed).toHaveLength(1);
      for (const result of refused)
        expect((result as PromiseRejectedResult).reason).toBeInstanceOf(TurnInProgressError);
      const page = await log.listItems(id, { limit: 100 });
      expect(page.items).toHaveLength(1);
      expect((await log.get(id)).counts).toMatchObject({ items: 1, turns: 1 });
    });

    it(`keeps every item and seq dense when ${writers} appends race`, async () => {
      const store = makeStore();
      const log = new SessionLog(store, { keyPrefix: `${fresh()}/` });
      const id = fresh();
      await log.create({ id });
      const batches: Item[][] = Array.from({ length: writers }, (_, writer) =>
        Array.from(
          { length: 1 + (writer % 3) },
          (_, index) => ({ type: 'message', role: 'user', content: `w${writer}-${index}` }) as Item,
        ),
      );
      const ranges = await Promise.all(batches.map((batch) => log.append(id, batch)));
      const total = batches.reduce((sum, batch) => sum + batch.length, 0);
      const seqs = ranges
        .flatMap(({ first_seq, last_seq }) => Array.from({ length: last_seq - first_seq + 1 }, (_, i) => first_seq + i))
        .sort((a, b) => a - b);
      expect(seqs).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      const page = await log.listItems(id, { limit: 1000 });
      expect(page.items.map((item) => item.seq)).toEqual(Array.from({ length: total }, (_, i) => total - i));
      const contents = page.items.map((item) => (item.type === 'message' ? item.content : '')).sort();
      expect(contents).toEqual(
        batches
          .flat()
          .map((item) => (item.type === 'message' ? item.content : ''))
          .sort(),
      );
      // Each append's items are contiguous and in order.
      batches.forEach((batch, writer) => {
        const { first_seq } = ranges[writer]!;
        const stored = page.items
          .filter((item) => item.seq >= first_seq && item.seq < first_seq + batch.length)
          .sort((a, b) => a.seq - b.seq);
        expect(stored.map((item) => (item.type === 'message' ? item.content : ''))).toEqual(
          batch.map((item) => (item.type === 'message' ? item.content : '')),
        );
      });
    });

    it(
      `stores one input when ${writers * 2} claims race with one Idempotency-Key, and after the turn closes they ` +
        `replay it`,
      async () => {
        const store = makeStore();
        const log = new SessionLog(store, { keyPrefix: `${fresh()}/` });
        const id = fresh();
        await log.create({ id });
        const claim = () =>
          log.beginTurn(id, {
            input: [{ type: 'message', role: 'user', content: 'once' }],
            idempotencyKey: 'k',
            requestHash: 'a'.repeat(64),
          });
        const results = await Promise.allSettled(Array.from({ length: writers * 2 }, claim));
        const claimed = results.flatMap((result) =>
          result.status === 'fulfilled' && result.value.kind === 'claimed' ? [result.value.turn] : [],
        );
        expect(claimed).toHaveLength(1);
        for (const result of results)
          if (result.status === 'rejected') expect(result.reason).toMatchObject({ code: 'turn_in_progress' });
        await log.completeTurn(claimed[0]!, {
          status: 'completed',
          output: [{ type: 'message', role: 'assistant', content: 'done' }],
          receipt: {},
          response: { answer: 'done' },
        });
        // Later records do not hide the key: a retry still replays.
        await log.append(id, [{ type: 'message', role: 'user', content: 'later' }]);
        const replays = await Promise.all(Array.from({ length: writers }, claim));
        for (const replay of replays)
          expect(replay).toEqual({
            kind: 'replay',
            turn: 1,
            response: { answer: 'done' },
            status: 'completed',
            outputSeq: 2,
          });
        const page = await log.listItems(id, { limit: 100 });
        expect(page.items.filter((item) => item.type === 'message' && item.content === 'once')).toHaveLength(1);
      },
    );

    it('loses nothing when appends race with packing', async () => {
      const store = makeStore();
      const log = new SessionLog(store, { keyPrefix: `${fresh()}/`, packMinRecords: 2, keepRecords: 1 });
      const id = fresh();
      await log.create({ id });
      const work: Promise<unknown>[] = [];
      for (let i = 0; i < writers; i++) {
        work.push(log.append(id, [{ type: 'message', role: 'user', content: `a${i}` }]));
        if (i % 2 === 1) work.push(log.pack(id));
      }
      await Promise.all(work);
      await Promise.all([log.pack(id), log.pack(id)]);
      const page = await log.listItems(id, { limit: 1000 });
      expect(page.items.map((item) => item.seq)).toEqual(Array.from({ length: writers }, (_, i) => writers - i));
    });

    it('withdraws a queued input or marks it for its pickup, never both, when the two race', async () => {
      const store = makeStore();
      const log = new SessionLog(store, { keyPrefix: `${fresh()}/` });
      const id = fresh();
      await log.create({ id });
      const scope = await log.scope(id);
      for (const digit of ['1', '2', '3', '4']) {
        const keyHash = digit.repeat(64);
        const input: Item[] = [{ type: 'message', role: 'user', content: `queued ${digit}` }];
        await log.enqueue(id, { input, request: {}, key_sha256: keyHash });
        const { writer } = (await log.readQueued(scope, keyHash))!;
        const [withdraw, mark] = await Promise.allSettled([
          log.withdrawQueued(id, keyHash),
          log.markQueued(scope, keyHash, writer),
        ]);
        const left = await log.readQueued(scope, keyHash);
        if (withdraw.status === 'fulfilled') {
          expect(mark.status === 'rejected' && mark.reason).toBeInstanceOf(QueuedWithdrawnError);
          expect(left).toBeNull();
        } else {
          expect(withdraw.reason).toBeInstanceOf(QueuedInputTakenError);
          expect(mark.status).toBe('fulfilled');
          expect(left?.taking_at).toBeDefined();
        }
      }
    });
  });
}
