import { describe, expect, it } from 'vitest';
import {
  CorruptObjectError,
  InvalidRequestError,
  NotFoundError,
  SessionExistsError,
  TailgateError,
  TurnClosedError,
  TurnInProgressError,
} from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import { recordKey, sessionConfigKey, sessionPrefix, viewKey } from '../../lib/session/keys.ts';
import { VIEW_VERSION } from '../../lib/session/view-records.ts';
import { parseView } from '../support/stored-view.ts';
import { compactCallItem, compactOutputItem } from '../../lib/strategies/compact-text.ts';
import { selectTail } from '../../lib/strategies/select-tail.ts';
import { SessionLog, type OpenTurn } from '../support/session-log.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { defineSessionLogConcurrency } from './session-log-concurrency.ts';

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const assistant = (content: string): Item => ({ type: 'message', role: 'assistant', content });
const call = (id: string, name = 'lookup', args = '{}'): Item => ({
  type: 'function_call',
  call_id: id,
  name,
  arguments: args,
});
const output = (id: string, text: string): Item => ({ type: 'function_call_output', call_id: id, output: text });

function setup(options: ConstructorParameters<typeof SessionLog>[1] = {}) {
  const store = new MemoryStore();
  let now = new Date('2026-01-01T00:00:00Z');
  const log = new SessionLog(store, { clock: () => now, ...options });
  return { store, log, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

async function claim(log: SessionLog, id: string, input: Item[], idempotencyKey?: string): Promise<OpenTurn> {
  const begun = await log.beginTurn(id, { input, ...(idempotencyKey ? { idempotencyKey } : {}) });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  return begun.turn;
}

describe('SessionLog: sessions', () => {
  it('creates once, stores the config at session.json, and refuses a second create', async () => {
    const { store, log } = setup();
    const created = await log.create({
      id: 's1',
      instructions: 'be brief',
      strategies: 'shorten_tools, inbox',
      metadata: { a: 1 },
    });
    expect(created).toMatchObject({
      id: 's1',
      instructions: 'be brief',
      model: null,
      strategies: ['shorten_tools', 'inbox'],
      tools: [],
      counts: { items: 0, turns: 0, tool_calls: 0 },
    });
    expect(await store.head(sessionConfigKey('', 's1'))).not.toBeNull();
    await expect(log.create({ id: 's1' })).rejects.toBeInstanceOf(SessionExistsError);
    await expect(log.create({ id: 's1' })).rejects.toMatchObject({ code: 'session_exists' });
    expect(await log.get('s1')).toEqual(created);
  });

  it('generates an id when none is given', async () => {
    const { log } = setup();
    const created = await log.create({});
    expect(created.id).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    expect((await log.get(created.id)).id).toBe(created.id);
  });

  it.each(['../x', 'a/b', '', 'x'.repeat(65), 'sp ace'])(
    'refuses the invalid id %j before touching storage',
    async (id) => {
      const { store, log } = setup();
      await expect(log.create({ id })).rejects.toBeInstanceOf(InvalidRequestError);
      await expect(log.get(id)).rejects.toBeInstanceOf(InvalidRequestError);
      expect((await store.list('')).objects).toEqual([]);
    },
  );

  it('gives NotFoundError for a missing session on every entry point', async () => {
    const { log } = setup();
    await expect(log.get('nope')).rejects.toMatchObject({ code: 'not_found' });
    await expect(log.append('nope', [user('x')])).rejects.toBeInstanceOf(NotFoundError);
    await expect(log.beginTurn('nope', { input: [user('x')] })).rejects.toBeInstanceOf(NotFoundError);
    await expect(log.listItems('nope', { limit: 10 })).rejects.toBeInstanceOf(NotFoundError);
    await expect(log.delete('nope')).rejects.toBeInstanceOf(NotFoundError);
    await expect(log.update('nope', { model: 'echo' })).rejects.toBeInstanceOf(NotFoundError);
  });

  it('treats a caller that breaks its invariants as a bug (a plain Error, a 500), not a client 400', async () => {
    const { log } = setup();
    await log.create({ id: 's1' });
    // HTTP input is validated by the routes' schemas; what reaches the log unchecked is lib/'s own mistake.
    for (const broken of [
      log.listSessions({ limit: 0 }),
      log.beginTurn('s1', { input: [{ type: 'message', role: 'nobody' } as never] }),
    ]) {
      const error = await broken.catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(TailgateError);
      expect((error as Error).message).toMatch(/^session log invariant: /);
    }
  });

  it('updates only the given fields, keeps counts, and loses no concurrent update', async () => {
    const { log } = setup();
    await log.create({ id: 's1', instructions: 'a', metadata: { keep: true } });
    await log.append('s1', [user('x')]);
    const updated = await log.update('s1', { model: 'echo', strategies: ['none'] });
    expect(updated).toMatchObject({
      instructions: 'a',
      model: 'echo',
      strategies: ['none'],
      metadata: { keep: true },
      counts: { items: 1 },
    });
    await Promise.all([log.update('s1', { instructions: 'b' }), log.update('s1', { metadata: { other: 1 } })]);
    expect(await log.get('s1')).toMatchObject({ instructions: 'b', metadata: { other: 1 }, model: 'echo' });
  });

  it('deletes every object under the session prefix, over several list pages, and nothing else', async () => {
    const { store, log } = setup({ blobThreshold: 16 });
    await log.create({ id: 's1' });
    await log.create({ id: 's10' });
    for (let i = 0; i < 5; i++)
      await log.append('s1', [call(`c${i}`), output(`c${i}`, `a large output number ${i} `.repeat(4))]);
    for (let i = 0; i < 1100; i++) await store.put(`${sessionPrefix('', 's1')}inbox_removed/n${i}`, 'x');
    await log.append('s10', [user('stay')]);
    await log.delete('s1');
    expect((await store.list(sessionPrefix('', 's1'))).objects).toEqual([]);
    await expect(log.get('s1')).rejects.toBeInstanceOf(NotFoundError);
    expect((await log.listItems('s10', { limit: 10 })).items).toHaveLength(1);
  });
});

describe('SessionLog: items', () => {
  it('stops a page at about 4 MiB of items; has_more and next_before page through the rest', async () => {
    const { log } = setup({ blobThreshold: 1024 });
    await log.create({ id: 's1' });
    const big = (index: number) => `${index}`.padEnd(1_500_000, 'x');
    for (let index = 0; index < 7; index++) await log.append('s1', [user(big(index))]);
    await log.pack('s1');
    const seen: number[] = [];
    let before: number | undefined;
    for (let pages = 0; pages < 10; pages++) {
      const page = await log.listItems('s1', { limit: 1000, ...(before === undefined ? {} : { before }) });
      expect(page.items.length).toBeGreaterThanOrEqual(1);
      expect(JSON.stringify(page.items).length).toBeLessThanOrEqual(4.5 * 1024 * 1024);
      seen.push(...page.items.map((item) => item.seq));
      if (!page.has_more) break;
      before = page.next_before!;
    }
    expect(seen).toEqual([7, 6, 5, 4, 3, 2, 1]);
    // One item larger than the cap still comes alone.
    await log.append('s1', [user('y'.repeat(5 * 1024 * 1024))]);
    expect((await log.listItems('s1', { limit: 1000 })).items.map((item) => item.seq)).toEqual([8]);
  });

  it('assigns dense seqs from 1 across appends and turns, and never reuses one', async () => {
    const { log } = setup();
    await log.create({ id: 's1' });
    expect(await log.append('s1', [user('a'), user('b')])).toMatchObject({ first_seq: 1, last_seq: 2, record: 1 });
    const turn = await claim(log, 's1', [user('c')]);
    expect(turn.input.map((item) => item.seq)).toEqual([3]);
    expect(turn.turn).toBe(1);
    const stored = await log.completeTurn(turn, {
      status: 'completed',
      output: [call('k1'), assistant('d')],
      receipt: {},
    });
    expect(stored.map((item) => item.seq)).toEqual([4, 5]);
    // A failed turn's input keeps its seqs; the next seq follows it.
    const failed = await claim(log, 's1', [user('e')]);
    await log.completeTurn(failed, {
      status: 'failed',
      output: [],
      receipt: {},
      error: { code: 'model_error', message: 'x' },
    });
    expect(await log.append('s1', [output('k1', 'r')])).toMatchObject({ first_seq: 7, last_seq: 7, record: 4 });
    const page = await log.listItems('s1', { limit: 100 });
    expect(page.items.map((item) => item.seq)).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(await log.get('s1')).toMatchObject({ counts: { items: 7, turns: 2, tool_calls: 1 } });
  });

  it(
    'takes empty or malformed items for a bug of its caller ' +
      '(the edge validates input): a plain Error, nothing stored',
    async () => {
      const { store, log } = setup();
      await log.create({ id: 's1' });
      const before = (await store.list('')).objects.length;
      for (const items of [[], [{ type: 'message', role: 'robot', content: 'x' } as unknown as Item]]) {
        const error = await log.append('s1', items).catch((caught: unknown) => caught);
        expect(error).toBeInstanceOf(Error);
        expect(error).not.toBeInstanceOf(TailgateError);
      }
      expect((await store.list('')).objects.length).toBe(before);
    },
  );

  it.each([
    { before: undefined, limit: 3, seqs: [10, 9, 8], has_more: true, next_before: 8 },
    { before: 8, limit: 3, seqs: [7, 6, 5], has_more: true, next_before: 5 },
    { before: 3, limit: 5, seqs: [2, 1], has_more: false, next_before: null },
    { before: 1, limit: 5, seqs: [], has_more: false, next_before: null },
    { before: 100, limit: 1000, seqs: [10, 9, 8, 7, 6, 5, 4, 3, 2, 1], has_more: false, next_before: null },
  ])('pages newest first: before=$before limit=$limit', async ({ before, limit, seqs, has_more, next_before }) => {
    for (const packed of [false, true]) {
      const { log } = setup({ packMinRecords: 2, keepRecords: 1, recentRecords: packed ? 1 : 0 });
      await log.create({ id: 's1' });
      for (let i = 1; i <= 10; i += 2) await log.append('s1', [user(`m${i}`), call(`c${i}`)]);
      if (packed) expect((await log.pack('s1')).packed).toBe(true);
      const page = await log.listItems('s1', { limit, ...(before !== undefined ? { before } : {}) });
      expect(page.items.map((item) => item.seq)).toEqual(seqs);
      expect(page).toMatchObject({ has_more, next_before });
    }
  });

  it(
    'keeps large outputs inline in records and out of line, once each, in segments; listItems and hydrate return ' +
      'them whole',
    async () => {
      // No views and no carry: the tail read below goes to the segment.
      const { store, log } = setup({
        blobThreshold: 100,
        packMinRecords: 1,
        keepRecords: 1,
        viewEveryRecords: 100,
        recentRecords: 0,
      });
      await log.create({ id: 's1' });
      const big = 'x'.repeat(50) + 'é'.repeat(60);
      await log.append('s1', [
        call('c1'),
        output('c1', big),
        call('c2'),
        output('c2', big),
        call('c3'),
        output('c3', 'small'),
      ]);
      const blobs = () => store.list(`${sessionPrefix('', 's1')}blob/`);
      expect((await blobs()).objects).toHaveLength(0);
      await log.append('s1', [user('later')]);
      expect((await log.pack('s1')).packed).toBe(true);
      expect((await blobs()).objects).toHaveLength(1);
      const page = await log.listItems('s1', { limit: 10 });
      expect(page.items.map((item) => (item.type === 'function_call_output' ? item.output : null))).toEqual([
        null,
        'small',
        null,
        big,
        null,
        big,
        null,
      ]);
      const turn = await claim(log, 's1', [user('go')]);
      const { items: view } = await log.readContext(turn, { toolCalls: 'all', seqs: [] });
      const ref = view.find((item) => item.type === 'function_call_output' && item.output_ref);
      expect(ref).toMatchObject({ output: '', output_ref: { length: big.length, head: big.slice(0, 256) } });
      const hydrated = await log.hydrate(turn.scope, view);
      expect(hydrated.filter((item) => item.type === 'function_call_output').map((item) => item.output)).toEqual([
        big,
        big,
        'small',
      ]);
      expect(hydrated.some((item) => 'output_ref' in item)).toBe(false);
    },
  );

  it('hydrates a long prompt without a step per item: only the outputs stored out of line are awaited', async () => {
    const { log } = setup();
    await log.create({ id: 's1' });
    const turn = await claim(log, 's1', [user('go')]);
    const prompt = Array.from({ length: 2_000 }, (_, index) => user(`message ${index}`));
    let ticks = 0;
    let settled = false;
    const hydrated = log.hydrate(turn.scope, prompt).finally(() => {
      settled = true;
    });
    // Microtasks run in order: count those that run before the hydration settles.
    while (!settled && ticks < 10_000) {
      await Promise.resolve();
      ticks++;
    }
    expect(ticks).toBeLessThan(50);
    const items = await hydrated;
    expect(items).toEqual(prompt);
    expect(items).not.toBe(prompt);
  });
});

describe('SessionLog: views', () => {
  const needs = (toolCalls: number, wholeCalls: number) => ({
    requirement: () => ({ toolCalls, seqs: [], wholeCalls }),
  });

  it('writes a view every few records; a turn then reads config, listing and view only', async () => {
    const store = new CountingStore(new MemoryStore());
    const log = new SessionLog(store, { viewEveryRecords: 4, packMinRecords: 4, keepRecords: 1 });
    await log.create({ id: 's1' });
    for (let i = 0; i < 12; i++)
      await log.append('s1', [call(`c${i}`, 'read', JSON.stringify({ i })), output(`c${i}`, `line ${i}`)]);
    const packed = await log.pack('s1', needs(3, 1));
    expect(packed.view).toBe(viewKey(await log.scope('s1'), 12));
    // Not due again until 4 more records follow.
    expect((await log.pack('s1', needs(3, 1))).view).toBeUndefined();
    for (let i = 12; i < 14; i++)
      await log.append('s1', [call(`c${i}`, 'read', JSON.stringify({ i })), output(`c${i}`, `line ${i}`)]);
    store.reset();
    const turn = await claim(new SessionLog(store), 's1', [user('go')]);
    const { items: view } = await new SessionLog(store).readContext(turn, { toolCalls: 3, seqs: [] });
    // get config, list, get view, put record: the newest record, listed with the etag its
    // append's put returned, is this process's (log/record-cache.ts); the tail came from the
    // claim's reads. The view holds its 12 call keys inline (the repeat index's delta) and names
    // no shard, so c12 and c13 need no shard read to be known new.
    expect(store.counts).toMatchObject({ get: 2, list: 1, put: 1 });
    expect(
      view.filter((item) => item.type === 'function_call').map((item) => item.type === 'function_call' && item.call_id),
    ).toEqual(['c11', 'c12', 'c13']);
  });

  it('holds what the strategies need: the newest calls whole, older ones as the strategies compact them', async () => {
    const { store, log } = setup({ viewEveryRecords: 1 });
    await log.create({ id: 's1' });
    const long = (i: number) => `a long output number ${i} `.repeat(30);
    for (let i = 0; i < 40; i++)
      await log.append('s1', [
        call(`c${i}`, 'read', JSON.stringify({ path: `${i}`.repeat(300) })),
        output(`c${i}`, long(i)),
      ]);
    await log.pack('s1', needs(20, 2));
    const stored = parseView(
      viewKey(await log.scope('s1'), 40),
      (await store.get(viewKey(await log.scope('s1'), 40)))!.body,
    );
    const tools = stored.tail!.items.filter((item) => item.type !== 'message');
    // 20 needed + a margin of 8 calls, with their outputs; the newest 2 calls whole.
    expect(tools).toHaveLength(2 * 28);
    expect(stored.tail!.window_start).toBe(tools[0]!.seq);
    const whole = tools.filter((item) => !('compacted' in item));
    expect(whole.map((item) => item.seq)).toEqual([77, 78, 79, 80]);
    for (const item of tools.filter((item) => 'compacted' in item)) {
      const i = item.call_id.slice(1);
      const fields = { call_id: item.call_id, seq: item.seq, created_at: item.created_at };
      const expected =
        item.type === 'function_call'
          ? compactCallItem({
              type: 'function_call',
              name: 'read',
              arguments: JSON.stringify({ path: i.repeat(300) }),
              ...fields,
            })
          : compactOutputItem({ type: 'function_call_output', output: long(Number(i)), ...fields });
      expect(item).toEqual(expected);
    }
    expect(stored.tail!.from_seq).toBe(1);
    expect(stored.aggregates).toMatchObject({ tool_calls: 40, tool_outputs: 40 });
    expect(stored.keys).toMatchObject({ count: 40, depth: 0 });
    // A turn whose strategies would show a compacted call whole reads past the view instead.
    const turn = await claim(log, 's1', [user('go')]);
    const { items: all } = await log.readContext(turn, { toolCalls: 10, seqs: [] });
    expect(all.some((item) => item.compacted)).toBe(false);
    const { items: compactedAllowed } = await log.readContext(turn, { toolCalls: 10, seqs: [], wholeCalls: 2 });
    expect(compactedAllowed.filter((item) => item.compacted)).toHaveLength(16);
  });

  it('moves a view window back by reading only the tool items it lacks, not every message again', async () => {
    const gets: string[] = [];
    const store = new (class extends MemoryStore {
      override async get(key: string, options?: Parameters<MemoryStore['get']>[1]) {
        gets.push(key);
        return super.get(key, options);
      }
    })();
    // Small segments: the history lies in many of them, as a long session's does.
    const log = new SessionLog(store, {
      viewEveryRecords: 1,
      packMinRecords: 1,
      keepRecords: 1,
      segmentTargetBytes: 1,
    });
    await log.create({ id: 's1' });
    const full: Item[] = [];
    const step = async (i: number) => {
      const items = [user(`question ${i}`), call(`c${i}`, 'read', JSON.stringify({ i })), output(`c${i}`, `line ${i}`)];
      await log.append('s1', items);
      full.push(...items);
    };
    for (let i = 0; i < 40; i++) {
      await step(i);
      await log.pack('s1', needs(4, 4));
    }
    const segments = (await store.list(sessionPrefix('', 's1'))).objects.filter((o) => o.key.endsWith('.seg')).length;
    expect(segments).toBeGreaterThan(20);
    // The strategies need 2 more calls after each call (a growing epoch): the margin of 8 the
    // view holds runs out every few views, and its window must start earlier.
    for (let i = 40; i < 56; i++) {
      await step(i);
      gets.length = 0;
      const toolCalls = 4 + 2 * (i - 39);
      expect((await log.pack('s1', needs(toolCalls, toolCalls))).view).toBeDefined();
      // The newest record, the view, a shard, and the one or two segments holding the missing
      // calls (a walk of the whole log would read each segment for its messages).
      expect(gets.filter((key) => key.endsWith('.seg')).length).toBeLessThanOrEqual(4);
      const turn = await claim(new SessionLog(store), 's1', [user('go')]);
      const requirement = { toolCalls, seqs: [] };
      const { items: read, readPastView } = await log.readContext(turn, requirement);
      expect(readPastView).toBe(false);
      const expected = selectTail(
        [...full, user('go')].map((item, index) => ({ ...item, seq: index + 1 })),
        requirement,
      );
      expect(read.map(({ created_at: _created, ...item }) => item)).toEqual(expected);
      await log.completeTurn(turn, { status: 'completed', output: [], receipt: {} });
      full.push(user('go'));
    }
  });

  it(
    'tells when a view no longer fits the strategies: it lacks what they need, or holds 32 KiB they no ' +
      'longer need',
    async () => {
      const { log } = setup({ viewEveryRecords: 1 });
      await log.create({ id: 's1' });
      const long = (i: number) => `output ${i} `.repeat(1000);
      for (let i = 0; i < 20; i++)
        await log.append('s1', [call(`c${i}`, 'read', JSON.stringify({ i })), output(`c${i}`, long(i))]);
      await log.pack('s1', needs(8, 6));
      const turn = await claim(log, 's1', [user('go')]);
      const requirement = (toolCalls: number, wholeCalls: number) => () => ({ toolCalls, seqs: [], wholeCalls });
      expect(log.needsView(turn, requirement(8, 6))).toBe(false);
      // One more output compacted (about 10 kB less): not worth a new view yet.
      expect(log.needsView(turn, requirement(8, 5))).toBe(false);
      // A new epoch: 4 outputs of about 10 kB compacted.
      expect(log.needsView(turn, requirement(8, 2))).toBe(true);
      // More calls than the view holds (8 + a margin of 8).
      expect(log.needsView(turn, requirement(18, 6))).toBe(true);
      // The turn's output counts: a call stored by this turn starts the new epoch for the next turn.
      const stored = await log.completeTurn(turn, {
        status: 'completed',
        output: [call('c20', 'read', '{"i":20}')],
        receipt: {},
      });
      expect(
        log.needsView(turn, (aggregates) => ({
          toolCalls: 8,
          seqs: [],
          wholeCalls: aggregates.tool_calls > 20 ? 2 : 6,
        })),
      ).toBe(false);
      expect(
        log.needsView(
          turn,
          (aggregates) => ({ toolCalls: 8, seqs: [], wholeCalls: aggregates.tool_calls > 20 ? 2 : 6 }),
          stored,
        ),
      ).toBe(true);
    },
  );

  it('reports a corrupt view by its key', async () => {
    const { store, log } = setup({ viewEveryRecords: 1 });
    await log.create({ id: 's1' });
    await log.append('s1', [user('a')]);
    await log.pack('s1');
    await store.put(
      viewKey(await log.scope('s1'), 1),
      JSON.stringify({ format: 'tailgate.view.v1', v: VIEW_VERSION, policy: viewPolicy.version, record: 1 }),
    );
    await expect(log.beginTurn('s1', { input: [user('b')] })).rejects.toMatchObject({
      code: 'corrupt_object',
      key: viewKey(await log.scope('s1'), 1),
    });
    // The claim failed before committing: no open turn is left behind.
    expect(await store.get(recordKey(await log.scope('s1'), 2))).toBeNull();
  });
});

describe('SessionLog: turns', () => {
  it('refuses a second claim and an append while a turn is open', async () => {
    const { log } = setup();
    await log.create({ id: 's1' });
    await claim(log, 's1', [user('a')]);
    await expect(log.beginTurn('s1', { input: [user('b')] })).rejects.toBeInstanceOf(TurnInProgressError);
    await expect(log.append('s1', [user('b')])).rejects.toMatchObject({ code: 'turn_in_progress' });
  });

  it('closes a turn whose lease expired as failed and lets the newcomer proceed', async () => {
    const { log, advance } = setup({ leaseMs: 1000 });
    await log.create({ id: 's1' });
    const crashed = await claim(log, 's1', [user('a')], 'key-1');
    advance(999);
    await expect(log.beginTurn('s1', { input: [user('b')] })).rejects.toBeInstanceOf(TurnInProgressError);
    advance(2);
    const next = await claim(log, 's1', [user('b')]);
    expect(next.turn).toBe(2);
    expect(next.input[0]!.seq).toBe(2);
    await expect(
      log.completeTurn(crashed, { status: 'completed', output: [assistant('late')], receipt: {} }),
    ).rejects.toBeInstanceOf(TurnClosedError);
    const replay = await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'key-1' });
    expect(replay).toMatchObject({ kind: 'replay', status: 'failed', error: { code: 'lease_expired' } });
  });

  it('replays the stored outcome for a repeated idempotency key, also after packing', async () => {
    const { store, log } = setup({ packMinRecords: 2, keepRecords: 1 });
    await log.create({ id: 's1' });
    const turn = await claim(log, 's1', [user('a')], 'retry-me');
    await expect(log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' })).rejects.toBeInstanceOf(
      TurnInProgressError,
    );
    await log.completeTurn(turn, {
      status: 'completed',
      output: [assistant('hello')],
      receipt: { seqs: [1] },
      response: { turn: 1, text: 'hello' },
    });
    const before = (await store.list('')).objects.length;
    const replay = await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' });
    expect(replay).toEqual({
      kind: 'replay',
      turn: 1,
      status: 'completed',
      response: { turn: 1, text: 'hello' },
      outputSeq: 2,
    });
    expect((await store.list('')).objects.length).toBe(before);
    for (let i = 0; i < 3; i++) await log.append('s1', [user(`x${i}`)]);
    expect((await log.pack('s1')).packed).toBe(true);
    expect(await log.beginTurn('s1', { input: [user('a')], idempotencyKey: 'retry-me' })).toEqual(replay);
    // A different key is a new turn.
    expect((await log.beginTurn('s1', { input: [user('b')], idempotencyKey: 'other' })).kind).toBe('claimed');
  });

  it('keeps aggregates of the history, with repeated calls found across views and records', async () => {
    const { log } = setup();
    await log.create({ id: 's1' });
    const first = await claim(log, 's1', [user('go')]);
    expect(first.aggregates).toMatchObject({ tool_calls: 0, tool_outputs: 0 });
    await log.completeTurn(first, {
      status: 'completed',
      output: [call('a', 'ls', '{"d":1,"e":2}'), call('b', 'cat')],
      receipt: {},
    });
    const second = await claim(log, 's1', [output('a', '1'), output('b', '2')]);
    // No repeat yet (a `repeated: {}` in toMatchObject would match any map: a subset).
    expect(second.aggregates).toMatchObject({ tool_calls: 2, tool_outputs: 2 });
    expect(second.aggregates.repeated.size).toBe(0);
    await log.completeTurn(second, { status: 'completed', output: [call('c', 'ls', '{"e":2,"d":1}')], receipt: {} });
    const third = await claim(log, 's1', [output('c', '3')]);
    expect(third.aggregates.tool_calls).toBe(3);
    expect(third.aggregates.repeated.seqs()).toEqual([6]);
  });
});

describe('SessionLog: corrupt and foreign objects', () => {
  it.each([
    ['not JSON', '{nope'],
    ['foreign JSON', JSON.stringify({ hello: 'world' })],
    ['invalid UTF-8', new Uint8Array([0xff, 0xfe, 0x7b])],
  ])('reports %s at session.json as CorruptObjectError naming the key', async (_label, body) => {
    const { store, log } = setup();
    await store.put(sessionConfigKey('', 's1'), body);
    const error = await log.get('s1').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CorruptObjectError);
    expect((error as CorruptObjectError).key).toBe(sessionConfigKey('', 's1'));
    expect((error as Error).message).toBe('a stored object is invalid');
    expect((error as CorruptObjectError).reason).not.toBe('');
  });

  it('reports a corrupt record, segment and blob by key, never returning partial data', async () => {
    // No records carried, so a page has to read the older records and the segment.
    const { store, log } = setup({ packMinRecords: 2, keepRecords: 1, blobThreshold: 10, recentRecords: 0 });
    await log.create({ id: 's1' });
    for (let i = 0; i < 4; i++)
      await log.append('s1', [user(`m${i}`), call(`c${i}`), output(`c${i}`, `output number ${i}`)]);
    const keys = (await store.list(`${sessionPrefix('', 's1')}turn/`)).objects.map((object) => object.key);
    await store.put(keys[0]!, JSON.stringify({ format: 'tailgate.record.v1' }));
    await expect(log.listItems('s1', { limit: 10 })).rejects.toMatchObject({ code: 'corrupt_object', key: keys[0] });
    await log.create({ id: 's2' });
    for (let i = 0; i < 4; i++) await log.append('s2', [user(`m${i}`), call(`c${i}`), output(`c${i}`, 'short')]);
    const packed = await log.pack('s2');
    expect(packed.packed).toBe(true);
    const segment = packed.segment!;
    const original = (await store.get(segment))!.body;
    const broken = original.slice();
    // Inside the first tool line (the states section before it is read only by a fork).
    broken[new TextDecoder().decode(original).indexOf('"function_call"')] = 0x7d;
    await store.put(segment, broken);
    await expect(log.listItems('s2', { limit: 10 })).rejects.toMatchObject({ code: 'corrupt_object', key: segment });
    await store.put(segment, original.slice(0, 20));
    await expect(log.listItems('s2', { limit: 10 })).rejects.toMatchObject({ code: 'corrupt_object', key: segment });
  });

  it('reports a tampered out-of-line payload by its key', async () => {
    const { store, log } = setup({ blobThreshold: 10, packMinRecords: 1, keepRecords: 1, recentRecords: 0 });
    await log.create({ id: 's1' });
    await log.append('s1', [call('c1'), output('c1', 'a long enough output')]);
    await log.append('s1', [user('later')]);
    await log.pack('s1');
    const blob = (await store.list(`${sessionPrefix('', 's1')}blob/`)).objects[0]!.key;
    await store.put(blob, 'tampered');
    await expect(log.listItems('s1', { limit: 10 })).rejects.toMatchObject({ code: 'corrupt_object', key: blob });
  });
});

describe('SessionLog: storage faults', () => {
  const isRecordPut = ({ operation, key }: { operation: string; key: string }) =>
    operation === 'put' && /\/turn\/(?:g\w+\/)?\d{12}$/.test(key);
  const isDonePut = ({ operation, key }: { operation: string; key: string }) =>
    operation === 'put' && key.endsWith('.done');

  it('commits once when a record or completion put lands but its answer is lost', async () => {
    const store = new FaultyStore(new MemoryStore());
    const log = new SessionLog(store);
    await log.create({ id: 's1' });
    store.failWhen(isRecordPut, { after: true, times: 1 });
    expect(await log.append('s1', [user('a'), user('b')])).toMatchObject({ first_seq: 1, last_seq: 2, record: 1 });
    store.failWhen(isRecordPut, { after: true, times: 1 });
    const turn = await claim(log, 's1', [user('c')]);
    store.failWhen(isDonePut, { after: true, times: 1 });
    expect(
      (await log.completeTurn(turn, { status: 'completed', output: [assistant('d')], receipt: {} })).map(
        (item) => item.seq,
      ),
    ).toEqual([4]);
    expect(store.injected).toBe(3);
    expect((await log.listItems('s1', { limit: 10 })).items.map((item) => item.seq)).toEqual([4, 3, 2, 1]);
    expect(await log.get('s1')).toMatchObject({ counts: { items: 4, turns: 1 } });
  });

  it('stores an append once when its put landed but was answered refused, and another append came first', async () => {
    const memory = new MemoryStore();
    const other = new SessionLog(memory);
    await other.create({ id: 's1' });
    // The first record put lands but answers null (an adapter's retry meeting its own write:
    // 412), and meanwhile another writer appends.
    let armed = true;
    const store = new FaultyStore(memory);
    const refusing: ObjectStore = {
      get: (key, options) => store.get(key, options),
      head: (key) => store.head(key),
      list: (prefix, options) => store.list(prefix, options),
      delete: (keys) => store.delete(keys),
      put: async (key, body, options) => {
        const result = await store.put(key, body, options);
        if (armed && result && isRecordPut({ operation: 'put', key })) {
          armed = false;
          await other.append('s1', [user('B')]);
          return null;
        }
        return result;
      },
    };
    expect(await new SessionLog(refusing).append('s1', [user('A')])).toMatchObject({ first_seq: 1 });
    const contents = (await other.listItems('s1', { limit: 10 })).items.map((item) =>
      item.type === 'message' ? item.content : '',
    );
    expect(contents).toEqual(['B', 'A']);
  });

  it('keeps a packed record number taken: a writer that stalled before its put cannot create it again', async () => {
    const memory = new MemoryStore();
    const options = { packMinRecords: 1, keepRecords: 1 };
    const fast = new SessionLog(memory, options);
    await fast.create({ id: 's1' });
    for (let i = 0; i < 3; i++) await fast.append('s1', [user(`setup ${i}`)]);
    // The slow writer reads the head (newest: record 3), then stalls before its put of record 4.
    let release!: () => void;
    let stalled!: () => void;
    const isStalled = new Promise<void>((resolve) => (stalled = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    let armed = true;
    const slowStore: ObjectStore = {
      get: (key, options) => memory.get(key, options),
      head: (key) => memory.head(key),
      list: (prefix, options) => memory.list(prefix, options),
      delete: (keys) => memory.delete(keys),
      put: async (key, body, options) => {
        if (armed && isRecordPut({ operation: 'put', key })) {
          armed = false;
          stalled();
          await gate;
        }
        return memory.put(key, body, options);
      },
    };
    const slow = new SessionLog(slowStore, options).append('s1', [user('A')]);
    await isStalled;
    for (const content of ['B1', 'B2', 'B3']) await fast.append('s1', [user(content)]);
    await fast.pack('s1');
    release();
    // Record 4 is buried, not deleted: the stalled put is refused, and the writer commits after it.
    expect(await slow).toMatchObject({ record: 7, first_seq: 7 });
    const contents = (await fast.listItems('s1', { limit: 100 })).items
      .map((item) => (item.type === 'message' ? item.content : ''))
      .reverse();
    expect(contents).toEqual(['setup 0', 'setup 1', 'setup 2', 'B1', 'B2', 'B3', 'A']);
  });

  it('replays a key whose turn completed between a claim reading an empty log and reading the key', async () => {
    const memory = new MemoryStore();
    const log = new SessionLog(memory);
    await log.create({ id: 's1' });
    // The slow claim lists the log while it is empty, then waits before it reads idem/.
    let release!: () => void;
    let listed!: () => void;
    const hasListed = new Promise<void>((resolve) => (listed = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slowStore: ObjectStore = {
      get: async (key, options) => {
        if (key.includes('/idem/')) {
          listed();
          await gate;
        }
        return memory.get(key, options);
      },
      head: (key) => memory.head(key),
      list: (prefix, options) => memory.list(prefix, options),
      delete: (keys) => memory.delete(keys),
      put: (key, body, options) => memory.put(key, body, options),
    };
    const slow = new SessionLog(slowStore).beginTurn('s1', { input: [user('once')], idempotencyKey: 'k' });
    await hasListed;
    const fast = await claim(log, 's1', [user('once')], 'k');
    await log.completeTurn(fast, {
      status: 'completed',
      output: [assistant('done')],
      receipt: {},
      response: { ok: true },
    });
    release();
    expect(await slow).toEqual({ kind: 'replay', turn: 1, response: { ok: true }, status: 'completed', outputSeq: 2 });
    expect((await log.listItems('s1', { limit: 10 })).items).toHaveLength(2);
  });

  it('stores nothing and reports the error when a record put fails before landing', async () => {
    const store = new FaultyStore(new MemoryStore());
    const log = new SessionLog(store);
    await log.create({ id: 's1' });
    store.failWhen(isRecordPut, { times: 1 });
    await expect(log.append('s1', [user('a')])).rejects.toMatchObject({ code: 'storage_error' });
    expect((await log.listItems('s1', { limit: 10 })).items).toEqual([]);
    expect(await log.append('s1', [user('a')])).toMatchObject({ first_seq: 1, last_seq: 1, record: 1 });
  });
});

describe('SessionLog: packing', () => {
  it('survives a crash at any point of packing: readers see every item once, the next pack cleans up', async () => {
    // The packer writes the segment, then buries what it covers (empty records and completions).
    for (const crashAt of ['segment put', 'bury']) {
      const store = new FaultyStore(new MemoryStore());
      const log = new SessionLog(store, { packMinRecords: 2, keepRecords: 1, recentRecords: 0 });
      await log.create({ id: 's1' });
      for (let i = 0; i < 6; i++) {
        const turn = await claim(log, 's1', [user(`u${i}`)]);
        await log.completeTurn(turn, { status: 'completed', output: [call(`c${i}`), assistant(`a${i}`)], receipt: {} });
      }
      const expected = (await log.listItems('s1', { limit: 100 })).items;
      store.failWhen(
        ({ operation, key }) =>
          operation === 'put' && (crashAt === 'bury' ? /\/\d{12}(\.done)?$/.test(key) : key.endsWith('.seg')),
        { after: crashAt === 'segment put' },
      );
      await expect(log.pack('s1')).rejects.toThrow();
      store.heal();
      expect((await log.listItems('s1', { limit: 100 })).items).toEqual(expected);
      const turn = await claim(log, 's1', [user('next')]);
      const { items: view } = await log.readContext(turn, { toolCalls: 'all', seqs: [] });
      expect(view.map((item) => item.seq)).toEqual(Array.from({ length: 19 }, (_, i) => i + 1));
      await log.completeTurn(turn, { status: 'completed', output: [], receipt: {} });
      const live = async () =>
        (await store.list('sessions/s1/turn/')).objects.filter((object) => object.size > 0).length;
      const before = await live();
      const result = await log.pack('s1');
      expect(result.deleted).toBeGreaterThan(0);
      expect(await live()).toBeLessThan(before);
      expect((await log.listItems('s1', { limit: 100 })).items.slice(1)).toEqual(expected);
    }
  });

  it('keeps the newest two views, not one per pack (each as large as its tail), listing pages of 100', async () => {
    const store = new MemoryStore();
    // Small segments, so that most views' records are in segments older than the newest.
    const log = new SessionLog(store, { segmentTargetBytes: 2_000 });
    await log.create({ id: 's1' });
    // The page sizes a pack asks for: what precedes the newest segment is the pack debt, so a
    // page of 100 keys serves it however long the log (each listed key costs the file store a stat).
    const limits: number[] = [];
    const list = store.list.bind(store);
    for (let block = 0; block < 60; block++) {
      await log.append('s1', [user(`task ${block}`), ...Array.from({ length: 20 }, (_, i) => call(`c${block}_${i}`))]);
      if (block % 4 !== 3) continue;
      store.list = (prefix, options) => {
        limits.push(options?.limit ?? 1000);
        return list(prefix, options);
      };
      await log.pack('s1');
      store.list = list;
    }
    expect((await store.list('sessions/s1/turn/')).objects.length).toBeGreaterThan(100);
    expect(limits.length).toBeGreaterThan(0);
    expect(Math.max(...limits)).toBeLessThanOrEqual(100);
    const views = (await store.list('sessions/s1/')).objects.filter((object) => object.key.endsWith('.view'));
    expect(views.length).toBe(2);
    expect((await log.listItems('s1', { limit: 100 })).items.length).toBe(100);
  });

  it('keeps the newest two views when packs come many records apart (past a page of the listing)', async () => {
    const { store, log } = setup({ segmentTargetBytes: 2_000 });
    await log.create({ id: 's1' });
    // 60 records between views: the view a new one makes stale is past the page that holds the newest segment.
    for (let n = 0; n < 300; n++) {
      await log.append('s1', [user(`task ${n}`)]);
      if (n % 60 === 59) await log.pack('s1');
    }
    const views = (await store.list('sessions/s1/')).objects.filter((object) => object.key.endsWith('.view'));
    const records = views.map((object) => 1e12 - Number(/(\d{12})\.view$/.exec(object.key)![1]));
    expect(records).toEqual([300, 240]);
  });

  it('lists again when every view it listed was deleted since, instead of reading the whole log', async () => {
    const memory = new MemoryStore();
    let hiding = false;
    let hidden = 0;
    let segmentReads = 0;
    // Once hiding, the first two view reads answer as deleted: both views the listing names (two
    // packs since the listing removed them).
    const store = new Proxy(memory, {
      get(target, property) {
        if (property === 'get')
          return (key: string, options?: object) => {
            if (key.endsWith('.seg')) segmentReads += 1;
            return key.endsWith('.view') && hiding && hidden++ < 2 ? Promise.resolve(null) : target.get(key, options);
          };
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const log = new SessionLog(store, { segmentTargetBytes: 2_000 });
    await log.create({ id: 's1' });
    for (let block = 0; block < 12; block++) {
      await log.append('s1', [user(`task ${block}`), ...Array.from({ length: 10 }, (_, i) => call(`c${block}_${i}`))]);
      if (block % 4 === 3) await log.pack('s1', { refresh: true });
    }
    const expected = (await new SessionLog(memory).previewContext('s1', () => ({ toolCalls: 'all', seqs: [] }))).items;
    segmentReads = 0;
    hiding = true;
    const preview = await log.previewContext('s1', () => ({ toolCalls: 'all', seqs: [] }));
    expect(preview.items).toEqual(expected);
    // Both listed views answered as deleted; the list again named the view, which served.
    expect(hidden).toBe(3);
    // The view served: no segment was read.
    expect(segmentReads).toBe(0);
  });

  it('lets concurrent packers and readers agree on one history', async () => {
    const { log } = setup({ packMinRecords: 1, keepRecords: 1, segmentTargetBytes: 300, recentRecords: 1 });
    await log.create({ id: 's1' });
    for (let i = 0; i < 12; i++) await log.append('s1', [user(`m${i}`), call(`c${i}`), output(`c${i}`, `r${i}`)]);
    const [, , page] = await Promise.all([
      log.pack('s1'),
      log.pack('s1'),
      log.listItems('s1', { limit: 1000 }),
      log.pack('s1'),
    ]);
    const after = await log.listItems('s1', { limit: 1000 });
    expect(page.items.map((item) => item.seq)).toEqual(Array.from({ length: 36 }, (_, i) => 36 - i));
    expect(after.items).toEqual(page.items);
  });
});

defineSessionLogConcurrency('memory', () => new MemoryStore());
