import { describe, expect, it } from 'vitest';
import { ForkRefusedError, InvalidRequestError, NotFoundError } from '../../lib/errors.ts';
import type { Item } from '../../lib/items.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { MAX_FORK_DEPTH } from '../../lib/session/fork-point.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { CountingStore } from '../support/counting-store.ts';
import type { PromptItem } from '../../lib/items.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { readTail } from '../../lib/session/log/tail-reader.ts';
import { logCursor } from '../../lib/session/unit-cursor.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';
import { SessionLog, summarized, type OpenTurn } from '../support/session-log.ts';

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const assistant = (content: string): Item => ({ type: 'message', role: 'assistant', content });
const toolCall = (id: string): Item => ({ type: 'function_call', call_id: id, name: 'read', arguments: '{}' });
const output = (id: string, text: string): Item => ({ type: 'function_call_output', call_id: id, output: text });

/** Small segments and blobs, so a few dozen items make several segments and out-of-line outputs. */
const OPTIONS = { blobThreshold: 64, segmentTargetBytes: 2048, packMinRecords: 2, keepRecords: 1 };

function setup() {
  const store = new MemoryStore();
  let now = new Date('2026-01-01T00:00:00Z');
  const log = new SessionLog(store, { clock: () => now, ...OPTIONS });
  return { store, log, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
}

async function turn(log: SessionLog, id: string, input: Item[], answer: Item[]): Promise<void> {
  const begun = await log.beginTurn(id, { input });
  if (begun.kind !== 'claimed') throw new Error('expected a claim');
  const open: OpenTurn = begun.turn;
  await log.completeTurn(open, { status: 'completed', output: answer, receipt: {} });
}

/** A session of `rounds` tool rounds (large outputs go out of line), packed as it goes. */
async function grown(log: SessionLog, id: string, rounds: number): Promise<void> {
  await log.create({ id, instructions: 'be brief', metadata: { origin: id } });
  for (let round = 0; round < rounds; round++) {
    await turn(log, id, [user(`question ${round}`)], [toolCall(`${id}-c${round}`)]);
    await log.append(id, [output(`${id}-c${round}`, `result ${round} `.repeat(12))]);
    await log.pack(id);
  }
}

async function allItems(log: SessionLog, id: string) {
  const items = [];
  let before: number | undefined;
  for (;;) {
    const page = await log.listItems(id, { limit: 7, ...(before ? { before } : {}) });
    items.push(...page.items);
    if (!page.has_more) return items.reverse();
    before = page.next_before!;
  }
}

async function exportText(log: SessionLog, id: string): Promise<string[]> {
  const { lines } = await log.export(id);
  const all: string[] = [];
  for await (const line of lines) all.push(line);
  return all.slice(1);
}

async function keysUnder(store: ObjectStore, prefix: string): Promise<string[]> {
  return (await store.list(prefix, { limit: 1000 })).objects.map((object) => object.key);
}

describe('SessionLog.fork', () => {
  it("gives a session whose history is the parent's up to the point, read from the parent's objects", async () => {
    const { store, log } = setup();
    await grown(log, 'p', 12);
    const parentItems = await allItems(log, 'p');
    const at = parentItems.length;
    const fork = await log.fork('p', { at_seq: at, fields: { id: 'f', metadata: { mine: true } } });
    expect(fork).toMatchObject({ id: 'f', instructions: 'be brief', metadata: { mine: true }, counts: { items: at } });
    // Nothing of the history is copied: the fork holds its config and one record of no items.
    const own = (await keysUnder(store, sessionPrefix('', 'f'))).filter((key) => !key.endsWith('session.json'));
    expect(own).toHaveLength(1);
    expect((await store.get(own[0]!))!.body.length).toBeLessThan(1024);
    expect(await allItems(log, 'f')).toEqual(parentItems);
    expect(await exportText(log, 'f')).toEqual(await exportText(log, 'p'));
    // Both go on, each with its own next seqs.
    await turn(log, 'p', [user('parent only')], [assistant('p')]);
    await turn(log, 'f', [user('fork only')], [assistant('f')]);
    const forkItems = await allItems(log, 'f');
    expect(forkItems.slice(0, at)).toEqual(parentItems);
    expect(forkItems.slice(at).map((item) => [item.seq, item.type === 'message' && item.content])).toEqual([
      [at + 1, 'fork only'],
      [at + 2, 'f'],
    ]);
    expect((await allItems(log, 'p')).slice(at).map((item) => item.type === 'message' && item.content)).toEqual([
      'parent only',
      'p',
    ]);
    expect((await log.get('f')).counts).toMatchObject({ items: at + 2, turns: 13 });
    // The parent packs past the fork point: its segments then reach over it, and the fork
    // still reads only up to it.
    const forkExport = await exportText(log, 'f');
    for (let round = 0; round < 4; round++) {
      await turn(log, 'p', [user(`later ${round}`)], [assistant('ok')]);
      await log.pack('p');
    }
    expect(await allItems(log, 'f')).toEqual(forkItems);
    expect(await exportText(log, 'f')).toEqual(forkExport);
    const requirement = () => ({ toolCalls: 'all' as const, seqs: [] });
    const preview = await log.previewContext('f', requirement);
    expect(preview.items.map((item) => item.seq)).toEqual(forkItems.map((item) => item.seq));
    // Its turns are the parent's up to the fork point, then its own.
    const turns = await log.listTurns('f', { limit: 100 });
    expect(turns.turns.map((listed) => listed.turn)).toEqual(Array.from({ length: 13 }, (_, index) => 13 - index));
    expect(turns.turns[0]!.input).toEqual({ first_seq: at + 1, last_seq: at + 1 });
    expect(turns.turns[1]!.input?.first_seq).toBeLessThan(at);
  });

  it('reads the same prompt as the parent at the fork point, and packs its own records only', async () => {
    const { store, log } = setup();
    await grown(log, 'p', 10);
    const at = (await log.get('p')).counts.items;
    await log.fork('p', { at_seq: at, fields: { id: 'f' } });
    const requirement = () => ({ toolCalls: 3, seqs: [] });
    const parent = await log.previewContext('p', requirement);
    const fork = await log.previewContext('f', requirement);
    expect(await log.hydrate(fork.scope, fork.items)).toEqual(await log.hydrate(parent.scope, parent.items));
    const parentKeys = await keysUnder(store, sessionPrefix('', 'p'));
    for (let round = 0; round < 4; round++) {
      await turn(log, 'f', [user(`f${round}`)], [toolCall(`f-c${round}`)]);
      await log.append('f', [output(`f-c${round}`, `fork result ${round} `.repeat(12))]);
      await log.pack('f');
    }
    // The fork's packer wrote under the fork only; the parent's objects are as they were.
    expect(await keysUnder(store, sessionPrefix('', 'p'))).toEqual(parentKeys);
    expect((await allItems(log, 'f')).map((item) => item.seq)).toEqual(
      Array.from({ length: at + 12 }, (_, index) => index + 1),
    );
  });

  it("never reads an ancestor's items past the fork point, even an output of a call made before it", async () => {
    const { store, log } = setup();
    await log.create({ id: 'p' });
    await log.append('p', [user('start'), toolCall('x')]);
    await log.fork('p', { at_seq: 2, fields: { id: 'f' } });
    // Each answers the call its own way, then goes on; the parent packs past the fork point.
    for (const [id, answer] of [
      ['p', 'parent out'],
      ['f', 'fork out'],
    ] as const) {
      await log.append(id, [output('x', answer)]);
      for (let round = 0; round < 6; round++) {
        await log.append(id, [toolCall(`${id}${round}`), output(`${id}${round}`, `${id} ${round} `.repeat(10))]);
        await log.pack(id);
      }
    }
    const preview = await log.previewContext('f', () => ({ toolCalls: 2, seqs: [2] }));
    const answer = async (items: PromptItem[]) =>
      (await log.hydrate(preview.scope, items))
        .filter((item) => item.type === 'function_call_output' && item.call_id === 'x')
        .map((item) => item.type === 'function_call_output' && item.output);
    expect(await answer(preview.items)).toEqual(['fork out']);
    // The walk past a view, on its own: the call is in the parent's segment, which holds the
    // parent's output of it too, past the fork point.
    const walked = await readTail(
      logContext(store, { viewPolicy }),
      preview.scope,
      [],
      logCursor(store, preview.scope),
      { toolCalls: 2, seqs: [2] },
    );
    expect(await answer(walked)).toEqual(['fork out']);
    expect(JSON.stringify(await allItems(log, 'f'))).not.toContain('parent out');
  });

  it('forks at a turn, and forks of forks read every ancestor up to its point', async () => {
    const { log } = setup();
    await log.create({ id: 'p' });
    await turn(log, 'p', [user('a')], [assistant('b')]);
    await turn(log, 'p', [user('c')], [assistant('d')]);
    const fork = await log.fork('p', { at_turn: 2, fields: { id: 'f' } });
    expect(fork.counts).toEqual({ items: 4, turns: 2, tool_calls: 0 });
    await turn(log, 'f', [user('e')], [assistant('f')]);
    // A fork of the fork, at a point inside the parent's range, reads the parent directly.
    await log.fork('f', { at_turn: 1, fields: { id: 'g' } });
    expect((await allItems(log, 'g')).map((item) => item.type === 'message' && item.content)).toEqual(['a', 'b']);
    await log.fork('f', { at_turn: 3, fields: { id: 'h' } });
    await turn(log, 'h', [user('g')], [assistant('h')]);
    expect((await allItems(log, 'h')).map((item) => item.type === 'message' && item.content)).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
      'f',
      'g',
      'h',
    ]);
  });

  it(`refuses a fork deeper than ${MAX_FORK_DEPTH} histories`, async () => {
    const { log } = setup();
    await log.create({ id: 's0' });
    await log.append('s0', [user('0')]);
    for (let depth = 1; depth <= MAX_FORK_DEPTH; depth++) {
      await log.fork(`s${depth - 1}`, { at_seq: depth, fields: { id: `s${depth}` } });
      await log.append(`s${depth}`, [user(String(depth))]);
    }
    await expect(log.fork(`s${MAX_FORK_DEPTH}`, { at_seq: MAX_FORK_DEPTH + 1, fields: {} })).rejects.toBeInstanceOf(
      ForkRefusedError,
    );
    expect((await allItems(log, `s${MAX_FORK_DEPTH}`)).map((item) => item.seq)).toHaveLength(MAX_FORK_DEPTH + 1);
  });

  it('forks at a packed point as at the same point before it was packed: history, state and next prompt', async () => {
    const { store, log } = setup();
    await grown(log, 'p', 4);
    await log.compact('p', async (view) => {
      const last = view.items[view.items.length - 1]?.seq ?? 0;
      return summarized({
        start_seq: last - 3,
        summary: 'the first rounds',
        summarized: { first_seq: view.items[0]?.seq ?? 1, last_seq: last - 4 },
        interrupted: [],
        model: 'echo',
      });
    });
    // The point: a turn whose call has no output yet.
    await turn(log, 'p', [user('one more')], [toolCall('open')]);
    const { counts } = await log.get('p');
    await log.fork('p', { at_turn: counts.turns, fields: { id: 'early' } });
    await log.append('p', [output('open', 'done')]);
    for (let round = 0; round < 4; round++) {
      await turn(log, 'p', [user(`later ${round}`)], [assistant('ok')]);
      await log.pack('p');
    }
    const segments = (await keysUnder(store, sessionPrefix('', 'p'))).filter((key) => key.endsWith('.seg'));
    const ranges = segments.map((key) => key.split('/').pop()!.split('.')[0]!.split('-').slice(2).map(Number));
    expect(ranges.some(([first, last]) => first! <= counts.items && counts.items < last!)).toBe(true);
    await log.fork('p', { at_turn: counts.turns, fields: { id: 'late' } });
    await log.fork('p', { at_seq: counts.items, fields: { id: 'late-seq' } });
    for (const id of ['late', 'late-seq']) {
      expect(await allItems(log, id)).toEqual(await allItems(log, 'early'));
      expect((await log.get(id)).counts).toEqual(counts);
      expect(await log.currentContext(id)).toEqual(await log.currentContext('early'));
      expect((await log.currentContext(id))?.summary).toBe('the first rounds');
    }
    // The call open at the point is open in each: its output is taken, another call's refused.
    const prompts = [];
    for (const id of ['early', 'late']) {
      await expect(log.append(id, [output('never-made', 'x')])).rejects.toBeInstanceOf(InvalidRequestError);
      const begun = await log.beginTurn(id, { input: [output('open', 'done')] });
      if (begun.kind !== 'claimed') throw new Error('expected a claim');
      const { items: prompt } = await log.readContext(begun.turn, { toolCalls: 'all', seqs: [] });
      prompts.push(await log.hydrate(begun.turn.scope, prompt));
    }
    expect(prompts[1]).toEqual(prompts[0]);
    expect(prompts[0]!.length).toBeGreaterThan(0);
  });

  it("sketches a fork, writing nothing, whose preview is the written fork's, packed point or not", async () => {
    const store = new CountingStore(new MemoryStore());
    // One instant for every write and preview: a preview stamps its context's created_at as the claim would.
    const log = new SessionLog(store, { clock: () => new Date('2026-01-01T00:00:00Z'), ...OPTIONS });
    await grown(log, 'p', 4);
    await turn(log, 'p', [user('one more')], [toolCall('open')]);
    const { counts } = await log.get('p');
    // The previews of `of` under two tail requirements, their items hydrated.
    const both = (of: Parameters<SessionLog['previewContext']>[0]) =>
      Promise.all(
        [
          { toolCalls: 'all' as const, seqs: [] },
          { toolCalls: 1, seqs: [] },
        ].map(async (requirement) => {
          const { items, scope, ...state } = await log.previewContext(of, () => requirement);
          return { items: await log.hydrate(scope, items), state };
        }),
      );
    const previews = async (id: string) => {
      const sketch = await log.sketchFork(id, { at_turn: counts.turns, fields: { instructions: 'other' } });
      expect(sketch.session).toMatchObject({ counts, instructions: 'other', metadata: { origin: 'p' } });
      expect(sketch.openCalls).toEqual(['open']);
      return both(sketch);
    };
    const written = async (id: string) => {
      await log.fork('p', { at_turn: counts.turns, fields: { id, instructions: 'other' } });
      return both(id);
    };
    store.reset();
    const early = await previews('p');
    expect({ put: store.counts.put, delete: store.counts.delete }).toEqual({ put: 0, delete: 0 });
    expect(early).toEqual(await written('early'));
    expect(early[0]!.items.length).toBeGreaterThan(early[1]!.items.length);
    await log.append('p', [output('open', 'done')]);
    for (let round = 0; round < 4; round++) {
      await turn(log, 'p', [user(`later ${round}`)], [assistant('ok')]);
      await log.pack('p');
    }
    store.reset();
    const late = await previews('p');
    expect({ put: store.counts.put, delete: store.counts.delete }).toEqual({ put: 0, delete: 0 });
    expect(late).toEqual(early);
    expect(late).toEqual(await written('late'));
    // A sketch of a fork of a fork; refused where the fork is.
    const onFork = await log.sketchFork('late', { at_turn: counts.turns - 1, fields: {} });
    expect(onFork.session.counts.turns).toBe(counts.turns - 1);
    await expect(log.sketchFork('p', { at_turn: 99, fields: {} })).rejects.toBeInstanceOf(InvalidRequestError);
  });

  it('refuses a point that is not the end of a record, a turn that is not there, and a running turn', async () => {
    const { store, log } = setup();
    await grown(log, 'p', 6);
    const { last_seq } = await log.append('p', [user('x'), user('y')]);
    await expect(log.fork('p', { at_seq: last_seq - 1, fields: { id: 'f' } })).rejects.toBeInstanceOf(
      InvalidRequestError,
    );
    await expect(log.fork('p', { at_seq: last_seq + 1, fields: { id: 'f' } })).rejects.toBeInstanceOf(
      InvalidRequestError,
    );
    // Past the session's items: not in it, as a turn it does not have.
    await expect(log.fork('p', { at_seq: last_seq + 1, fields: { id: 'f' } })).rejects.toThrow(
      `at_seq: seq ${last_seq + 1} is not in session p`,
    );
    await expect(log.fork('p', { at_turn: 99, fields: { id: 'f' } })).rejects.toBeInstanceOf(InvalidRequestError);
    // A seq inside the first record is in the session, at no record's end.
    const first = await log.create({ id: 'one-record' });
    await log.append(first.id, [user('a'), user('b')]);
    await expect(log.fork(first.id, { at_seq: 1, fields: { id: 'f' } })).rejects.toThrow(
      /seq 1 does not end a turn or an append/,
    );
    const running = await log.beginTurn('p', { input: [user('z')] });
    if (running.kind !== 'claimed') throw new Error('expected a claim');
    await expect(log.fork('p', { at_turn: running.turn.turn, fields: { id: 'f' } })).rejects.toBeInstanceOf(
      ForkRefusedError,
    );
    await expect(log.fork('missing', { at_turn: 1, fields: { id: 'f' } })).rejects.toBeInstanceOf(NotFoundError);
    // Nothing was written for any of them.
    expect(await keysUnder(store, sessionPrefix('', 'f'))).toEqual([]);
    expect((await keysUnder(store, sessionPrefix('', 'p'))).filter((key) => key.includes('/forks/'))).toEqual([]);
  });
});

describe("a fork's turns", () => {
  /** What the strategies need: the newest 40 calls, 10 of them whole. */
  const needs = { requirement: () => ({ toolCalls: 40, seqs: [], wholeCalls: 10 }) };

  /** One model turn on a fresh log (as a request builds one): its storage operations and bytes read. */
  async function turnCost(store: CountingStore, id: string, index: number) {
    const log = new SessionLog(store);
    store.reset();
    const begun = await log.beginTurn(id, { input: [user(`go on ${index}`)] });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    const { items: prompt } = await log.readContext(begun.turn, needs.requirement());
    await log.completeTurn(begun.turn, { status: 'completed', output: [assistant('ok')], receipt: {} });
    const cost = { operations: store.operations, bytesRead: store.counts.bytesRead, prompt: prompt.length };
    await log.pack(id, needs);
    return cost;
  }

  it("cost what the parent's turns cost once the fork's first view is written", async () => {
    const store = new CountingStore(new MemoryStore());
    const loader = new SessionLog(store);
    await loader.create({ id: 'p' });
    for (let round = 0; round < 40; round++) {
      const items: Item[] = [];
      for (let call = 0; call < 25; call++) {
        items.push(toolCall(`p${round}-${call}`), output(`p${round}-${call}`, `line ${call}\n`.repeat(8)));
      }
      await loader.append('p', items);
      await loader.pack('p', needs);
    }
    const parentTurns = [];
    for (let turn = 0; turn < 4; turn++) parentTurns.push(await turnCost(store, 'p', turn));
    const parent = parentTurns[parentTurns.length - 1]!;
    const most = Math.max(...parentTurns.map((cost) => cost.operations));
    await loader.fork('p', { at_seq: (await loader.get('p')).counts.items, fields: { id: 'f' } });
    // What the route starts after its response (lib/turn/fork.ts): the fork's first view.
    await loader.pack('f', { ...needs, refresh: true });
    const fork = await turnCost(store, 'f', 0);
    // The parent's turn is in the fork's history too: two items more in the window.
    expect(fork.prompt).toBe(parent.prompt + 2);
    expect(fork.operations).toBeLessThanOrEqual(most);
    expect(fork.bytesRead).toBeLessThanOrEqual(parent.bytesRead * 1.25);
    // And so on: its later turns cost what the parent's did.
    for (let turn = 1; turn < 4; turn++) {
      const next = await turnCost(store, 'f', turn);
      expect(next.operations, `turn ${turn}`).toBeLessThanOrEqual(most);
    }
  });
});

describe('deleting a session with forks', () => {
  it('leaves every fork whole, and the last fork gone takes the shared objects with it', async () => {
    const { store, log } = setup();
    await grown(log, 'p', 8);
    const at = (await log.get('p')).counts.items;
    await log.fork('p', { at_seq: at, fields: { id: 'f' } });
    await turn(log, 'f', [user('more')], [assistant('yes')]);
    await log.fork('f', { at_seq: at + 2, fields: { id: 'g' } });
    const forkExport = await exportText(log, 'f');
    const grandExport = await exportText(log, 'g');
    await log.delete('p');
    await expect(log.get('p')).rejects.toBeInstanceOf(NotFoundError);
    expect(await exportText(log, 'f')).toEqual(forkExport);
    await log.delete('f');
    expect(await exportText(log, 'g')).toEqual(grandExport);
    await turn(log, 'g', [user('still')], [assistant('here')]);
    await log.delete('g');
    expect(await keysUnder(store, 'sessions/')).toEqual([]);
  });

  it('the last fork of a deleted parent gone, a sweep of the parent created again keeps its inbox', async () => {
    const { store, log } = setup();
    await grown(log, 'p', 2);
    const at = (await log.get('p')).counts.items;
    await log.fork('p', { at_seq: at, fields: { id: 'f' } });
    await log.delete('p');
    await log.create({ id: 'p' });
    const inbox = ['inbox/pending', 'inbox_removed/delivered', 'inbox_unreadable/set-aside'].map(
      (rest) => `${sessionPrefix('', 'p')}${rest}`,
    );
    for (const key of inbox) await store.put(key, 'x');
    await log.delete('f');
    const left = await keysUnder(store, sessionPrefix('', 'p'));
    expect(inbox.filter((key) => !left.includes(key))).toEqual([]);
  });

  it('a fork after its parent was deleted finds no session and leaves nothing', async () => {
    const { store, log } = setup();
    await grown(log, 'p', 2);
    const at = (await log.get('p')).counts.items;
    await log.delete('p');
    await expect(log.fork('p', { at_seq: at, fields: { id: 'f' } })).rejects.toBeInstanceOf(NotFoundError);
    expect(await keysUnder(store, 'sessions/')).toEqual([]);
  });
});
