import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, PutOptions } from '../../lib/store/object-store.ts';
import { TurnClosedError } from '../../lib/errors.ts';
import { journalEvents, journalTurn } from '../../lib/turn/journal.ts';
import { errorRecord } from '../../lib/turn/receipt.ts';
import type { TurnEvent } from '../../lib/turn/types.ts';
import { openTurnServices } from '../support/journal-services.ts';
import { SessionLog } from '../support/session-log.ts';

/** A turn's event journal: batched by time, each key written once, replayed in order. */

/** A memory store that counts the puts of each key. */
class PutCountingStore extends MemoryStore {
  readonly puts = new Map<string, number>();
  override async put(key: string, body: Body, options?: PutOptions) {
    this.puts.set(key, (this.puts.get(key) ?? 0) + 1);
    return super.put(key, body, options);
  }
}

async function setup() {
  const store = new PutCountingStore();
  const { sessions, services, background } = await openTurnServices(store, 'j');
  /** Closes a journal and waits for its last batch (written after the response). */
  const close = async (journal: ReturnType<typeof journalTurn>) => {
    journal.close();
    await vi.advanceTimersByTimeAsync(0);
    await Promise.all(background);
  };
  return { store, sessions, services, close };
}

const started = { n: 1, event: 'turn.started', data: { turn: 1, first_seq: 2 } };
const delta = { n: 2, event: 'output_text.delta', data: { delta: 'par' } };
const leaseExpired = (n: number) => ({
  n,
  event: 'error',
  data: { error: expect.objectContaining({ code: 'lease_expired' }) },
});

/**
 * Turn 1 of session `j`, whose owner journaled `events` and died; `passLease` moves the log's
 * clock an hour on, `read` gives every event after `after`.
 */
async function ownerDied(events: { n: number; event: string; data: unknown }[]) {
  let now = Date.parse('2030-01-01T00:00:00Z');
  const { sessions, services } = await openTurnServices(new MemoryStore(), 'j', () => new Date(now));
  await sessions.journal().write(await sessions.scope('j'), 1, 1, { writer: 'w', events });
  const read = async (after: number) => {
    const read = [];
    for await (const event of journalEvents(services, 'j', 1, after)) read.push(event);
    return read;
  };
  return { sessions, services, read, passLease: () => (now += 60 * 60 * 1000) };
}

describe('turn event journal', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes at most one batch a second, each key once, the last marked as the end', async () => {
    const { store, services, close } = await setup();
    const journal = journalTurn(services, 'j');
    journal.emit({ event: 'turn.started', data: { turn: 1, first_seq: 2 } });
    // 3.5 s of streaming, a delta every 100 ms.
    for (let index = 0; index < 35; index++) {
      await vi.advanceTimersByTimeAsync(100);
      journal.emit({ event: 'output_text.delta', data: { delta: `d${index} ` } });
    }
    await close(journal);
    const keys = [...store.puts.keys()].filter((key) => key.includes('/events/'));
    // One batch per second of streaming, plus the last.
    expect(keys.length).toBeLessThanOrEqual(3 + 2);
    expect(keys.length).toBeGreaterThanOrEqual(3);
    for (const key of keys) expect(store.puts.get(key)).toBe(1);

    vi.useRealTimers();
    const events = [];
    for await (const event of journalEvents(services, 'j', 1, 0)) events.push(event);
    expect(events.map((event) => event.n)).toEqual(Array.from({ length: 36 }, (_, index) => index + 1));
    expect(events.slice(1).map((event) => (event.data as { delta: string }).delta)).toEqual(
      Array.from({ length: 35 }, (_, index) => `d${index} `),
    );
    const after = [];
    for await (const event of journalEvents(services, 'j', 1, 30)) after.push(event.n);
    expect(after).toEqual([31, 32, 33, 34, 35, 36]);
  });

  it('a follower replays each event once when a batch whose write failed left its index out', async () => {
    vi.useRealTimers();
    const { sessions, services } = await setup();
    const scope = await sessions.scope('j');
    const journal = sessions.journal();
    const batch = (from: number, to: number, end = false) => ({
      writer: 'w',
      events: Array.from({ length: to - from + 1 }, (_, at) => ({ n: from + at, event: 'delta', data: {} })),
      ...(end ? { end } : {}),
    });
    // Batch 2's write failed: 1 and 3 are there while the turn runs.
    await journal.write(scope, 1, 1, batch(1, 3));
    await journal.write(scope, 1, 3, batch(7, 9));
    const follower = journalEvents(services, 'j', 1, 0);
    const seen: number[] = [];
    for (let at = 0; at < 6; at++) seen.push((await follower.next()).value!.n);
    await journal.write(scope, 1, 4, batch(10, 11, true));
    for await (const event of follower) seen.push(event.n);
    expect(seen).toEqual([1, 2, 3, 7, 8, 9, 10, 11]);
  });

  it("ends a turn whose owner died once its lease ran out by the log's clock, failed as lease_expired", async () => {
    vi.useRealTimers();
    // Its owner wrote its first events, then died: no last batch, no completion, no renewal.
    const { sessions, services, passLease } = await ownerDied([started, delta]);
    const follower = journalEvents(services, 'j', 1, 0);
    expect((await follower.next()).value).toEqual(started);
    expect((await follower.next()).value).toEqual(delta);
    expect((await sessions.getTurn('j', 1)).status).toBe('in_progress');
    passLease();
    const rest = [];
    for await (const event of follower) rest.push(event);
    // Numbered past all an owner alive after all could have streamed to its own client meanwhile.
    expect(rest).toEqual([leaseExpired(100_003)]);
    expect(await sessions.getTurn('j', 1)).toMatchObject({ status: 'failed', error: { code: 'lease_expired' } });
  });

  it('ends a dead turn for a client that saw events live its owner never journaled, after them', async () => {
    vi.useRealTimers();
    // The owner streamed events 1 to 4 to its client and journaled 1 and 2, then died.
    const { read, passLease } = await ownerDied([started, delta]);
    passLease();
    // The client comes back with Last-Event-ID 4: it learns how the turn ended, numbered after 4.
    expect(await read(4)).toEqual([leaseExpired(100_003)]);
    // Every reader then gets the same events with the same ids.
    expect(await read(0)).toEqual([started, delta, leaseExpired(100_003)]);
  });

  it('gives the last event of an ended journal to a reader past every event in it', async () => {
    vi.useRealTimers();
    const { read, passLease } = await ownerDied([started]);
    passLease();
    // Another reader ended the journal first, its error numbered past what an owner streams unjournaled.
    expect(await read(0)).toEqual([started, leaseExpired(100_002)]);
    expect(await read(3)).toEqual([leaseExpired(100_002)]);
    // A reader past every event is given the last.
    expect(await read(100_005)).toEqual([leaseExpired(100_002)]);
    // A reader that saw the error itself is given nothing again.
    expect(await read(100_002)).toEqual([]);
  });

  it("numbers a dead turn's end after a Last-Event-ID no owner could stream only as far as one could", async () => {
    vi.useRealTimers();
    const { read, passLease } = await ownerDied([started, delta]);
    passLease();
    // A reader with a bogus id still learns how the turn ended, under a number other clients can send back.
    expect(await read(999_999_999_999_999)).toEqual([leaseExpired(100_003)]);
    expect(await read(0)).toEqual([started, delta, leaseExpired(100_003)]);
  });

  it('gives a reader past every event the last event journaled when the end batch carries none', async () => {
    vi.useRealTimers();
    // Its turn.completed went in a batch of the timer's, just before its owner's last batch, empty.
    const completed = { n: 2, event: 'turn.completed', data: { turn: 1 } };
    const { sessions, read } = await ownerDied([started, completed]);
    await sessions.journal().write(await sessions.scope('j'), 1, 2, { writer: 'w', events: [], end: true });
    expect(await read(0)).toEqual([started, completed]);
    expect(await read(5)).toEqual([completed]);
    expect(await read(2)).toEqual([]);
  });

  it('ends at once the journal of a dead turn someone else closed over a lease ago', async () => {
    // The log keeps the faked time: the owner's claim, the close and the reader share one clock.
    const { sessions, services } = await openTurnServices(new MemoryStore(), 'j', () => new Date());
    const scope = await sessions.scope('j');
    const started = { n: 1, event: 'turn.started', data: { turn: 1, first_seq: 2 } };
    await sessions.journal().write(scope, 1, 1, { writer: 'w', events: [started] });
    // Its owner died; a minute later a writer (a Cron run's sweep, a retrieve) closed it.
    vi.setSystemTime(Date.now() + 60_000);
    expect(await sessions.closeIfExpired('j', 1)).toMatchObject({ error: { code: 'lease_expired' } });
    // An hour later a client comes back to its events.
    vi.setSystemTime(Date.now() + 60 * 60_000);
    let events: unknown[] | undefined;
    void (async () => {
      const read = [];
      for await (const event of journalEvents(services, 'j', 1, 0)) read.push(event);
      events = read;
    })();
    // A few polls, far less than a lease (TURN_LEASE_MS, 30 s).
    await vi.advanceTimersByTimeAsync(2_000);
    expect(events).toEqual([started, leaseExpired(100_002)]);
  });

  it('ends at once the journal of a dead turn someone else closed as its lease ran out, however lately', async () => {
    // The log keeps the faked time: the owner's claim, the close and the reader share one clock.
    const { sessions, services } = await openTurnServices(new MemoryStore(), 'j', () => new Date());
    const scope = await sessions.scope('j');
    await sessions.journal().write(scope, 1, 1, { writer: 'w', events: [started, delta] });
    // Its owner died; once its lease ran out a writer (a retrieve, a GET of the turn) closed it.
    vi.setSystemTime(Date.now() + 60_000);
    expect(await sessions.closeIfExpired('j', 1)).toMatchObject({ error: { code: 'lease_expired' } });
    // A client comes back to its events right after that close, from after the first.
    let events: unknown[] | undefined;
    void (async () => {
      const read = [];
      for await (const event of journalEvents(services, 'j', 1, 1)) read.push(event);
      events = read;
    })();
    // A few polls, far less than a lease (TURN_LEASE_MS, 30 s): no owner's batch is due.
    await vi.advanceTimersByTimeAsync(2_000);
    expect(events).toEqual([delta, leaseExpired(100_003)]);
    const batches = await sessions.journal().read(scope, 1, 0);
    expect(batches.at(-1)).toMatchObject({ index: 2, end: true, events: [leaseExpired(100_003)] });
  });

  it("ends a live owner's turn a closer whose clock ran ahead closed as that owner and retrieve end it", async () => {
    const { sessions, services, background, turn } = await openTurnServices(new MemoryStore(), 'j', () => new Date());
    // Its owner is alive and streams; its first batch is written.
    const owner = journalTurn(services, 'j', 1);
    owner.emit({ event: 'turn.started', data: { turn: 1, first_seq: 2 } } as TurnEvent);
    owner.emit({ event: 'output_text.delta', data: { delta: 'par' } } as TurnEvent);
    await vi.advanceTimersByTimeAsync(1_000);
    // A closer whose clock runs a lease ahead (the owner's renewals notwithstanding) closes it.
    vi.setSystemTime(Date.now() + 60_000);
    expect(await sessions.closeIfExpired('j', 1)).toMatchObject({ error: { code: 'lease_expired' } });
    let events: { event: string; data: unknown }[] | undefined;
    void (async () => {
      const read = [];
      for await (const event of journalEvents(services, 'j', 1, 0)) read.push(event);
      events = read;
    })();
    await vi.advanceTimersByTimeAsync(2_000);
    expect(events).toEqual([started, { ...delta, n: 2 }, leaseExpired(100_003)]);
    // The owner completes: refused by that close, it ends its stream with the error it met.
    const refused = await sessions.completeTurn(turn, { status: 'completed', output: [], receipt: {} }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(TurnClosedError);
    owner.emit({ event: 'output_text.delta', data: { delta: 'is' } } as TurnEvent);
    owner.emit({ event: 'error', data: { error: errorRecord(refused) }, cause: refused } as TurnEvent);
    owner.close();
    await vi.advanceTimersByTimeAsync(0);
    await Promise.all(background);
    // Its live client's end is every reader's, and the turn's as retrieved.
    expect(events!.at(-1)!.data).toEqual({ error: errorRecord(refused) });
    expect((await sessions.getTurn('j', 1)).error).toEqual(errorRecord(refused));
    const again = [];
    for await (const event of journalEvents(services, 'j', 1, 0)) again.push(event);
    expect(again).toEqual(events);
    // Its live client, cut off after the owner's delta 3 (never journaled), resumes after it.
    const resumed = [];
    for await (const event of journalEvents(services, 'j', 1, 3)) resumed.push(event);
    expect(resumed).toEqual([leaseExpired(100_003)]);
  });

  /**
   * Turn 1 of session `j` completed (its answer stored with its completion), its owner having
   * journaled `events` in a batch that was not its last, then died, an hour ago; `read` gives
   * every event after `after`.
   */
  async function completedThenDied(
    events: { n: number; event: string; data: unknown }[],
    packed = false,
    stored?: unknown,
  ) {
    vi.useRealTimers();
    const hourAgo = Date.now() - 60 * 60_000;
    // It completed an hour ago by the log's clock.
    const store = new MemoryStore();
    const { sessions, services, background, turn } = await openTurnServices(store, 'j', () => new Date(hourAgo));
    const scope = await sessions.scope('j');
    await sessions.journal().write(scope, 1, 1, { writer: 'w', events });
    const output = [{ type: 'message' as const, role: 'assistant' as const, content: 'hello' }];
    const response = { session_id: 'j', turn: 1, output: [{ ...output[0]!, seq: 2 }], context: {} };
    await sessions.completeTurn(turn, { status: 'completed', output, receipt: {}, response: stored ?? response });
    if (packed) {
      // A second turn, then a pack: the first's completion is a line of a segment.
      const next = await sessions.beginTurn('j', { input: [{ type: 'message', role: 'user', content: 'more' }] });
      if (next.kind !== 'claimed') throw new Error('expected a claim');
      await sessions.completeTurn(next.turn, { status: 'completed', output, receipt: {} });
      const packing = new SessionLog(store, { packMinRecords: 1, keepRecords: 1, clock: () => new Date(hourAgo) });
      expect(await packing.pack('j')).toMatchObject({ packed: true });
    }
    const read = async (after: number) => {
      const read = [];
      for await (const event of journalEvents(services, 'j', 1, after)) read.push(event);
      return read;
    };
    return { read, response, services, background, batches: () => sessions.journal().read(scope, 1, 0) };
  }

  it('ends a turn whose owner died after its completion with its items done and turn.completed, once', async () => {
    const { read, response, batches } = await completedThenDied([started, delta]);
    const done = { event: 'output_item.done', data: { item: response.output[0] } };
    // Its client saw, live, events up to 5 its owner never journaled: the end comes after them.
    expect(await read(5)).toEqual([
      { n: 6, ...done },
      { n: 7, event: 'turn.completed', data: response },
    ]);
    expect(await read(0)).toEqual([
      started,
      delta,
      { n: 6, ...done },
      { n: 7, event: 'turn.completed', data: response },
    ]);
    expect(await read(9)).toEqual([{ n: 7, event: 'turn.completed', data: response }]);
    expect((await batches()).map((batch) => batch.index)).toEqual([1, 2]);
  });

  it('ends a completed turn whose owner died with its stored answer as it was stored, its JSON the same', async () => {
    const { read, response } = await completedThenDied([started, delta]);
    const ended = await read(2);
    // The 200 body its turn answered, the same text (not re-keyed): items and fields in their order.
    expect(ended.map((event) => JSON.stringify(event.data))).toEqual([
      JSON.stringify({ item: response.output[0] }),
      JSON.stringify(response),
    ]);
  });

  it("writes nothing of a slow owner's last batch once a reader ended its completed turn's journal", async () => {
    const { read, response, services, background, batches } = await completedThenDied([started, delta]);
    const item = { event: 'output_item.done', data: { item: response.output[0] } };
    const completed = { event: 'turn.completed', data: response };
    expect(await read(2)).toEqual([
      { n: 3, ...item },
      { n: 4, ...completed },
    ]);
    // Its owner, alive after all, journals its end a lease late: refused, it writes no more.
    const owner = journalTurn(services, 'j', 1);
    owner.emit(item as TurnEvent);
    owner.emit(completed as TurnEvent);
    owner.close();
    await Promise.all(background);
    expect((await batches()).map((batch) => batch.index)).toEqual([1, 2]);
    expect((await read(0)).filter((event) => event.event === 'turn.completed')).toHaveLength(1);
  });

  it('ends so a completed turn whose owner died once its completion was packed', async () => {
    const { read, response } = await completedThenDied([started, delta], true);
    expect(await read(2)).toEqual([
      { n: 3, event: 'output_item.done', data: { item: response.output[0] } },
      { n: 4, event: 'turn.completed', data: response },
    ]);
  });

  it('refuses to end with a stored answer that is not one (corrupt_object), writing no end', async () => {
    const { read, batches } = await completedThenDied([started, delta], false, { output: 'not a list' });
    await expect(read(2)).rejects.toMatchObject({ code: 'corrupt_object' });
    expect((await batches()).map((batch) => batch.index)).toEqual([1]);
  });

  it('ends with nothing more a completed turn whose owner journaled turn.completed before its last batch', async () => {
    const { read, response } = await completedThenDied([started]);
    const item = { n: 2, event: 'output_item.done', data: { item: response.output[0] } };
    const completed = { n: 3, event: 'turn.completed', data: response };
    const { read: again } = await completedThenDied([started, item, completed]);
    expect(await again(0)).toEqual([started, item, completed]);
    expect(await again(0)).toEqual([started, item, completed]);
    // One whose journal finished none of its items has them done before its end.
    expect(await read(1)).toEqual([item, completed]);
  });

  it('follows an owner completing late to its last batch when its close meets the reader closing it', async () => {
    vi.useRealTimers();
    let now = Date.parse('2030-01-01T00:00:00Z');
    let racing = false;
    let ownerDone = false;
    let ownerCompletes: () => Promise<void>;
    class RacingStore extends MemoryStore {
      override async put(key: string, body: Body, options?: PutOptions) {
        // The reader's close (create-only `.done`) meets the owner's completion, which lands first.
        if (racing && !ownerDone && key.endsWith('.done')) {
          ownerDone = true;
          await ownerCompletes();
        }
        return super.put(key, body, options);
      }
    }
    const { sessions, services, turn } = await openTurnServices(new RacingStore(), 'j', () => new Date(now));
    const scope = await sessions.scope('j');
    const started = { n: 1, event: 'turn.started', data: { turn: 1, first_seq: 2 } };
    const delta = { n: 2, event: 'output_text.delta', data: { delta: 'hello' } };
    await sessions.journal().write(scope, 1, 1, { writer: 'w', events: [started, delta] });
    const completed = { n: 3, event: 'turn.completed', data: { turn: 1 } };
    ownerCompletes = async () => {
      await sessions.completeTurn(turn, {
        status: 'completed',
        output: [{ type: 'message', role: 'assistant', content: 'hello' }],
        receipt: {},
      });
      // Its last batch follows its completion (journalTurn's close, after the response).
      setTimeout(
        () => void sessions.journal().write(scope, 1, 2, { writer: 'w', events: [completed], end: true }),
        100,
      );
    };
    const follower = journalEvents(services, 'j', 1, 0);
    expect((await follower.next()).value).toEqual(started);
    expect((await follower.next()).value).toEqual(delta);
    // The owner is slow: its lease ran out by the log's clock, but it is about to complete.
    now += 60_000;
    racing = true;
    const rest = [];
    for await (const event of follower) rest.push(event);
    expect(ownerDone).toBe(true);
    expect((await sessions.getTurn('j', 1)).status).toBe('completed');
    expect(rest).toEqual([completed]);
  });

  it('writes nothing for a turn that never started (refused before its claim)', async () => {
    const { store, services, close } = await setup();
    const journal = journalTurn(services, 'j');
    journal.emit({ event: 'error', data: { error: { code: 'turn_in_progress', message: 'busy' } }, cause: null });
    await close(journal);
    expect([...store.puts.keys()].some((key) => key.includes('/events/'))).toBe(false);
  });
});
