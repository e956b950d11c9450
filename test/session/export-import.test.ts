import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError, TailgateError } from '../../lib/errors.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import type { Item } from '../../lib/items.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionPrefix } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { exportLines, importLines, ndjsonLines, type TransferServices } from '../../lib/transfer.ts';
import { exportText } from '../support/export-lines.ts';
import { headerLine, itemLine, messageLine } from '../support/export-lines.ts';
import { CountingStore } from '../support/counting-store.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { SessionLog, summarized } from '../support/session-log.ts';
import type { LogView } from '../../lib/session/view-records.ts';
import { packOptions, sessionStrategyPlan } from '../../lib/turn/plan.ts';
import { runTurn } from '../../lib/turn/index.ts';
import type { ModelOutputItem } from '../../lib/models/model.ts';
import { recordingModel, servicesFor } from '../support/recording-model.ts';

/** Small segments and blobs, so a few hundred items make many segments and out-of-line outputs. */
const LOG_OPTIONS = { blobThreshold: 64, segmentTargetBytes: 4096, packMinRecords: 2, keepRecords: 1 };

function world(store: ObjectStore = new MemoryStore()) {
  const sessions = new SessionLog(store, LOG_OPTIONS);
  const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, '') });
  const services: TransferServices = { sessions, inbox, env: {} };
  return { store, sessions, inbox, services };
}

/** The bytes of `text`, in chunks of `size` (lines split across chunks). */
async function* chunks(text: string, size = 97): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  for (let start = 0; start < bytes.length; start += size) yield bytes.slice(start, start + size);
}

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };

async function importText(services: TransferServices, text: string) {
  return importLines(services, chunks(text), LIMITS);
}

/** One step of building a session: items appended, a pack, a compaction, a notice delivered. */
type Step =
  | { kind: 'append'; items: Item[] }
  | { kind: 'pack' }
  | { kind: 'compact' }
  | { kind: 'notice'; content: string };

const textArbitrary = fc.string({ maxLength: 200, unit: 'grapheme' });
const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc
    .array(
      fc.oneof(
        textArbitrary.map((content): Item[] => [{ type: 'message', role: 'user', content }]),
        fc
          .tuple(fc.string({ minLength: 1, maxLength: 8 }), textArbitrary, fc.nat(300))
          .map(([name, args, size]): Item[] => [
            { type: 'function_call', call_id: `c${name}${size}`, name: 'read', arguments: args },
            { type: 'function_call_output', call_id: `c${name}${size}`, output: 'x'.repeat(size) + name },
          ]),
      ),
      { minLength: 1, maxLength: 6 },
    )
    .map((groups) => ({ kind: 'append' as const, items: groups.flat() })),
  fc.constant({ kind: 'pack' as const }),
  fc.constant({ kind: 'compact' as const }),
  textArbitrary.map((content) => ({ kind: 'notice' as const, content: content || 'note' })),
);

async function build(w: ReturnType<typeof world>, id: string, steps: Step[]): Promise<void> {
  await w.sessions.create({ id, instructions: 'be brief', metadata: { team: 'a' }, expires_after_days: 9 });
  let turn = 0;
  for (const step of steps) {
    if (step.kind === 'append') {
      try {
        await w.sessions.append(id, step.items);
      } catch {
        // A call_id open already: the generated batch is refused, as the API would.
      }
    } else if (step.kind === 'pack') await w.sessions.pack(id);
    else if (step.kind === 'compact') {
      await w.sessions.compact(id, async (view) => {
        const first = view.items[0]?.seq;
        const last = view.items[view.items.length - 1]?.seq;
        if (first === undefined || last === undefined || last === first) return null;
        return summarized({
          start_seq: last,
          summary: `summary up to ${last - 1}`,
          summarized: { first_seq: first, last_seq: last - 1 },
          interrupted: [],
          model: 'echo',
        });
      });
    } else {
      await w.inbox.post(id, { content: step.content });
      turn += 1;
      await w.inbox.consume(id, { turn });
    }
  }
}

describe('session export and import', () => {
  it('round-trips byte for byte: export(import(export(s))) = export(s)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 25 }), async (steps) => {
        const source = world();
        await build(source, 's1', steps);
        const exported = await exportText(source.services, 's1');
        const target = world();
        const created = await importText(target.services, exported);
        expect(created.counts).toEqual({ ...(await source.sessions.get('s1')).counts, turns: 0 });
        expect(await exportText(target.services, 's1')).toBe(exported);
      }),
      { numRuns: 40 },
    );
  });

  it('exports out-of-line outputs whole and a compaction; imports them as segments, blobs and a view', async () => {
    const source = world();
    const items: Item[] = [];
    for (let index = 0; index < 60; index++) {
      items.push(
        { type: 'message', role: 'user', content: `question ${index}` },
        { type: 'function_call', call_id: `c${index}`, name: 'read', arguments: '{}' },
        { type: 'function_call_output', call_id: `c${index}`, output: `${'y'.repeat(200)}${index}` },
      );
    }
    await build(source, 's1', [{ kind: 'append', items }, { kind: 'pack' }, { kind: 'compact' }, { kind: 'pack' }]);
    const exported = await exportText(source.services, 's1');
    const lines = exported
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: 'session', id: 's1', instructions: 'be brief', metadata: { team: 'a' } });
    expect(lines.slice(1, 181).map((line) => line.seq)).toEqual(Array.from({ length: 180 }, (_, i) => i + 1));
    expect(lines[3]).toMatchObject({ type: 'function_call_output', output: `${'y'.repeat(200)}0` });
    expect(lines.some((line) => 'output_ref' in line)).toBe(false);
    expect(lines[181]).toMatchObject({ type: 'compaction', start_seq: 180 });

    const target = world();
    await importText(target.services, exported);
    const keys = (await target.store.list(sessionPrefix('', 's1'))).objects.map((object) => object.key);
    expect(keys.filter((key) => key.endsWith('.seg')).length).toBeGreaterThan(1);
    // Outputs in segments are out of line; the newest record, not packed yet, holds its own inline.
    expect(keys.filter((key) => key.includes('/blob/')).length).toBeGreaterThan(40);
    expect(keys.filter((key) => key.endsWith('.view')).length).toBeGreaterThan(0);
    expect(keys.filter((key) => key.includes('/context/')).length).toBe(1);
    expect(await target.sessions.currentContext('s1')).toMatchObject({ start_seq: 180 });
    const listed = await target.sessions.listSessions({ limit: 10 });
    expect(listed.sessions.map((row) => [row.id, row.counts?.items])).toEqual([['s1', 180]]);
    // The imported session takes turns and appends like any other.
    await target.sessions.append('s1', [{ type: 'message', role: 'user', content: 'more' }]);
    expect((await target.sessions.listItems('s1', { limit: 2 })).items.map((item) => item.seq)).toEqual([181, 180]);
  });

  /** An export of 240 calls (a few arguments repeated) with their outputs and messages: many segments when imported. */
  async function callsExport(): Promise<string> {
    const source = world();
    const items: Item[] = [];
    for (let call = 0; call < 240; call++) {
      const output = `${'o'.repeat((call * 53) % 150)}${call}`;
      items.push(
        { type: 'message', role: 'user', content: `step ${call}` },
        { type: 'function_call', call_id: `c${call}`, name: 'read', arguments: `{"path":"f${call % 37}"}` },
        { type: 'function_call_output', call_id: `c${call}`, output },
      );
    }
    await build(source, 's1', [{ kind: 'append', items }, { kind: 'pack' }]);
    return exportText(source.services, 's1');
  }

  it("stores one view, the last record's; the views between are made in memory and not written", async () => {
    const memory = new MemoryStore();
    const written: string[] = [];
    const recording: ObjectStore = {
      get: (key, options) => memory.get(key, options),
      head: (key) => memory.head(key),
      list: (prefix, options) => memory.list(prefix, options),
      delete: (keys) => memory.delete(keys),
      put: (key, body, options) => {
        written.push(key);
        return memory.put(key, body, options);
      },
    };
    const exported = await callsExport();
    await importText(world(recording).services, exported);
    expect(written.filter((key) => key.endsWith('.seg')).length).toBeGreaterThan(2 * 8);
    expect(written.filter((key) => key.endsWith('.view'))).toHaveLength(1);
    // No record is written to be read back and packed: only the last one, which stays.
    expect(written.filter((key) => /\/\d{12}$/.test(key))).toHaveLength(1);
    expect(await exportText(world(memory).services, 's1')).toBe(exported);
  });

  it('stores the view a pack makes of the imported log alone: the same aggregates, tail and repeat index', async () => {
    const w = world();
    await importText(w.services, await callsExport());
    const views = async () =>
      (await w.store.list(sessionPrefix('', 's1'), { limit: 1000 })).objects.filter((o) => o.key.endsWith('.view'));
    const [stored] = await views();
    const imported = JSON.parse(new TextDecoder().decode((await w.store.get(stored!.key))!.body)) as LogView;
    // Without the view, a pack reads the whole log for a new one.
    await w.store.delete(stored!.key);
    const plan = sessionStrategyPlan({}, { strategies: null, strategy_config: {} });
    await new SessionLog(w.store, LOG_OPTIONS).pack('s1', { ...packOptions(plan), refresh: true });
    const [again] = await views();
    const packed = JSON.parse(new TextDecoder().decode((await w.store.get(again!.key))!.body)) as LogView;
    expect(imported.aggregates.repeated).not.toEqual({});
    const shape = (view: LogView) => ({
      ...view,
      keys: view.keys.count,
      created_at: null,
      // An output the import held is inline where the log's segment holds it out of line.
      tail: view.tail && { ...view.tail, items: view.tail.items.map((item) => [item.seq, item.type]) },
    });
    expect(shape(imported)).toEqual(shape(packed));
  });

  /** Every segment's text of session `id`. */
  async function segmentsText(store: ObjectStore, id: string): Promise<string> {
    const keys = (await store.list(sessionPrefix('', id), { limit: 1000 })).objects
      .map((object) => object.key)
      .filter((key) => key.endsWith('.seg'));
    const bodies = await Promise.all(keys.map(async (key) => (await store.get(key))!.body));
    return bodies.map((body) => new TextDecoder().decode(body)).join('');
  }

  it('stores a line the schema keeps whole as it came, and an item it changes as its JSON', async () => {
    const w = world();
    const at = '2026-01-01T00:00:00.000Z';
    // Keys in another order, spaces, an escape: still the item, as the segment's reader parses it.
    const asSent = `{ "seq": 1, "created_at": "${at}", "content": "h\\u0069", "role": "user", "type": "message" }`;
    const parts =
      '{"type":"message","role":"user","content":[ {"type":"input_text","text":"p"} ],' +
      `"seq":2,"created_at":"${at}"}`;
    const large =
      `{"type":"function_call_output","call_id":"c","output":"${'L'.repeat(100)}", ` + `"seq":4,"created_at":"${at}"}`;
    const body = [
      headerLine('raw'),
      asSent,
      parts,
      itemLine(3, { type: 'function_call', call_id: 'c', name: 'read', arguments: '{}' }),
      large,
      ...Array.from({ length: 80 }, (_, index) => messageLine(index + 5)),
    ];
    await importText(w.services, `${body.join('\n')}\n`);
    const segments = await segmentsText(w.store, 'raw');
    expect(segments).toContain(`${asSent}\n`);
    // Content parts, and an output moved out of line, are what the import made of them.
    expect(segments).not.toContain(parts);
    expect(segments).toContain(`{"type":"message","role":"user","content":[{"type":"input_text","text":"p"}],"seq":2,`);
    expect(segments).not.toContain(large);
    expect(segments).toContain('"output_ref":{');
    const items = (await w.sessions.listItems('raw', { before: 5, limit: 4 })).items.reverse();
    expect(items[0]).toEqual({ type: 'message', role: 'user', content: 'hi', seq: 1, created_at: at });
    expect(items[3]).toMatchObject({ type: 'function_call_output', output: 'L'.repeat(100), seq: 4 });
    const exported = (await exportText(w.services, 'raw')).split('\n');
    expect(exported[1]).toBe(itemLine(1, { type: 'message', role: 'user', content: 'hi' }));
  });

  /** A session of 40 appends of 20 messages, packed into many segments. */
  async function longSession(store: ObjectStore) {
    const w = world(store);
    await w.sessions.create({ id: 'long' });
    for (let append = 0; append < 40; append++) {
      const items: Item[] = Array.from({ length: 20 }, (_, index) => ({
        type: 'message',
        role: 'user',
        content: `${append}/${index} ${'w'.repeat(100)}`,
      }));
      await w.sessions.append('long', items);
      await w.sessions.pack('long');
    }
    return w;
  }

  it('reads the log as the export is consumed, not all of it up front', async () => {
    const counting = new CountingStore(new MemoryStore());
    const w = await longSession(counting);
    const whole = await exportText(w.services, 'long');
    const read = counting.counts.bytesRead;
    counting.reset();
    const lines = await exportLines(w.services, 'long');
    let text = '';
    while (text.split('\n').length < 20) text += (await lines.next()).value;
    await lines.return(undefined);
    // The first lines come from the oldest segment: a small part of what the whole export read.
    expect(whole.startsWith(text)).toBe(true);
    expect(counting.counts.bytesRead).toBeLessThan(read / 8);
  });

  it('goes on from the next seq when a segment it listed is merged away meanwhile', async () => {
    const w = await longSession(new MemoryStore());
    const before = await exportText(w.services, 'long');
    const lines = await exportLines(w.services, 'long');
    // The header, then the first items: the walk has listed every segment.
    let text = `${(await lines.next()).value}${(await lines.next()).value}`;
    // Appends packed into the newest segment replace it (a merge below the target size).
    const sessions = new SessionLog(w.store, { ...LOG_OPTIONS, segmentTargetBytes: 1 << 20 });
    for (let append = 0; append < 3; append++) {
      await sessions.append('long', [{ type: 'message', role: 'user', content: `late ${append}` }]);
      await sessions.pack('long');
    }
    for (let next = await lines.next(); !next.done; next = await lines.next()) text += next.value;
    expect(text).toBe(before);
  });

  it('ends with not_found, not a corrupt log, when the session is deleted (or created again) meanwhile', async () => {
    for (const createAgain of [false, true]) {
      const w = await longSession(new MemoryStore());
      const lines = await exportLines(w.services, 'long');
      // The header, then the first items: the walk has listed every segment.
      await lines.next();
      await lines.next();
      await w.sessions.delete('long');
      if (createAgain) await w.sessions.create({ id: 'long' });
      const rest = (async () => {
        for (let next = await lines.next(); !next.done; next = await lines.next());
      })();
      await expect(rest).rejects.toMatchObject({ code: 'not_found', details: { id: 'long' } });
    }
  });

  it("keeps each segment's closing state: a fork at any segment's end has the calls open there open", async () => {
    const w = world();
    const lines = [headerLine('imported')];
    const calls = 60;
    for (let call = 1; call <= calls; call++) {
      lines.push(itemLine(2 * call - 1, { type: 'function_call', call_id: `c${call}`, name: 'read', arguments: '{}' }));
      const output = 'z'.repeat((call * 37) % 300);
      lines.push(itemLine(2 * call, { type: 'function_call_output', call_id: `c${call}`, output }));
    }
    await importText(w.services, `${lines.join('\n')}\n`);
    const ends = (await w.store.list(sessionPrefix('', 'imported'), { limit: 1000 })).objects
      .filter((object) => object.key.endsWith('.seg'))
      .map((object) => Number(object.key.split('.')[0]!.split('-').pop()));
    // Segments end after a call as well as after its output.
    expect(ends.some((end) => end % 2 === 1)).toBe(true);
    for (const end of ends) {
      const id = `fork-${end}`;
      await w.sessions.fork('imported', { at_seq: end, fields: { id } });
      const next = Math.floor((end + 1) / 2) + 1;
      // The first call after the point is not in the fork's history.
      await expect(
        w.sessions.append(id, [{ type: 'function_call_output', call_id: `c${next}`, output: 'x' }]),
      ).rejects.toBeInstanceOf(InvalidRequestError);
      if (end % 2 === 1) {
        const open = `c${(end + 1) / 2}`;
        await w.sessions.append(id, [{ type: 'function_call_output', call_id: open, output: 'x' }]);
      }
    }
  });

  it('keeps two segment writes in flight while it reads on, and no more', async () => {
    const source = await longSession(new MemoryStore());
    const exported = await exportText(source.services, 'long');
    const memory = new MemoryStore();
    let inFlight = 0;
    let most = 0;
    // Segment puts take 5 ms; everything else answers at once.
    const slow: ObjectStore = {
      get: (key, options) => memory.get(key, options),
      head: (key) => memory.head(key),
      list: (prefix, options) => memory.list(prefix, options),
      delete: (keys) => memory.delete(keys),
      put: async (key, body, options) => {
        if (!key.endsWith('.seg')) return memory.put(key, body, options);
        most = Math.max(most, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 5));
        inFlight -= 1;
        return memory.put(key, body, options);
      },
    };
    await importText(world(slow).services, exported);
    expect(most).toBe(2);
    expect(await exportText(world(memory).services, 'long')).toBe(exported);
  });

  it('reads lines split anywhere across chunks, with CRLF and blank lines', async () => {
    const read: unknown[] = [];
    for await (const batch of ndjsonLines(chunks('{"a":1}\r\n\n{"b":"é"}\n{"c":2}', 3), 100))
      for (const { line, value } of batch) read.push([line, value]);
    expect(read).toEqual([
      [1, { a: 1 }],
      [3, { b: 'é' }],
      [4, { c: 2 }],
    ]);
  });

  it("reads a chunk's lines at once the same: numbers, bytes, CRLF, non-ASCII, and the line at fault", async () => {
    const text = '{"a":1}\r\n\n{"b":"é"}\n{"c":2}\n{"d":3}\r\n{"e":4}';
    const read = async (size: number, limit = 100, source = text) => {
      const all: unknown[] = [];
      for await (const batch of ndjsonLines(chunks(source, size), limit))
        for (const { line, value, raw } of batch) all.push([line, value, new TextDecoder().decode(raw), raw.length]);
      return all;
    };
    const expected = [
      [1, { a: 1 }, '{"a":1}', 7],
      [3, { b: 'é' }, '{"b":"é"}', 10],
      [4, { c: 2 }, '{"c":2}', 7],
      [5, { d: 3 }, '{"d":3}', 7],
      [6, { e: 4 }, '{"e":4}', 7],
    ];
    for (const size of [1, 5, 12, 1000]) expect(await read(size), `chunks of ${size}`).toEqual(expected);
    // All ASCII: a chunk's lines are decoded at once and split, each line's bytes found by its offset.
    const ascii = text.replace('é', 'e');
    const asciiExpected = expected.map((row, index) => (index === 1 ? [3, { b: 'e' }, '{"b":"e"}', 9] : row));
    for (const size of [1, 5, 12, 1000])
      expect(await read(size, 100, ascii), `ASCII, chunks of ${size}`).toEqual(asciiExpected);
    await expect(read(1000, 9)).rejects.toMatchObject({ code: 'payload_too_large', details: { line: 3 } });
    const broken = new Uint8Array([...new TextEncoder().encode('{"a":1}\n{"b":2}\n"'), 0xff, 0x22, 10]);
    const lines = ndjsonLines(
      (async function* () {
        yield broken;
      })(),
      100,
    );
    await expect(
      (async () => {
        for await (const _ of lines);
      })(),
    ).rejects.toMatchObject({ message: 'line 3: not UTF-8' });
  });

  const header = headerLine('imp');
  const item = itemLine;
  const message = messageLine;

  it.each([
    ['an invalid item', [message(1), item(2, { type: 'message', role: 'robot', content: 'x' })], 400, 'line 3.role'],
    [
      'a dangling call output',
      [message(1), item(2, { type: 'function_call_output', call_id: 'nope', output: 'x' })],
      400,
      'line 3.call_id',
    ],
    ['a seq gap', [message(1), message(3)], 400, 'line 3.seq'],
    ['an item that is not JSON', [message(1), '{"type":'], 400, 'line 3: not JSON'],
    [
      'an oversize item',
      [message(1), item(2, { type: 'message', role: 'user', content: 'z'.repeat(3000) })],
      413,
      'line 3: the item is',
    ],
    ['an oversize line', [message(1), `{"x":"${'z'.repeat(9000)}"}`], 413, 'line 3 is longer'],
    ['an unknown line', [message(1), '{"type":"turn"}'], 400, 'line 3'],
    [
      'an item whose created_at is not a time',
      [message(1), JSON.stringify({ type: 'message', role: 'user', content: 'x', seq: 2, created_at: 'garbage' })],
      400,
      'line 3.created_at',
    ],
    [
      'a compaction past the items',
      [
        message(1),
        JSON.stringify({
          type: 'compaction',
          start_seq: 5,
          summary: 's',
          summarized: { first_seq: 1, last_seq: 1 },
          interrupted: [],
          model: 'm',
          created_at: 'x',
        }),
      ],
      400,
      'line 3: start_seq 5',
    ],
    [
      'an item after a notice',
      [
        message(1),
        JSON.stringify({
          type: 'notice',
          stored_as: 'n.md',
          name: 'n.md',
          posted_at: '2026-01-01T00:00:00.000Z',
          delivered_at: '2026-01-01T00:00:00.000Z',
          turn: 1,
          content: 'c',
        }),
        message(2),
      ],
      400,
      'line 4: out of order',
    ],
  ])('refuses %s with a 4xx naming the line, and stores nothing', async (_name, body, status, message) => {
    const w = world();
    const refusal = await importText(w.services, [header, ...body].join('\n')).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(TailgateError);
    const error = refusal as TailgateError;
    expect(error.code === 'payload_too_large' ? 413 : 400).toBe(status);
    expect(error.message).toContain(message);
    expect((await w.store.list('')).objects.map((object) => object.key)).toEqual([]);
  });

  it.each([
    ['not JSON', '{"type":'],
    ['too long', `{"x":"${'z'.repeat(9000)}"}`],
  ])('names the first line at fault when a later line of the same chunk is %s', async (_name, later) => {
    const w = world();
    const bad = item(2, { type: 'message', role: 'robot', content: 'x' });
    const text = [header, message(1), bad, later, message(3)].join('\n');
    // One chunk: its lines are read at once, the later fault with them.
    const refusal = await importLines(w.services, chunks(text, 1 << 20), LIMITS).catch((error: unknown) => error);
    expect(refusal).toMatchObject({ message: expect.stringContaining('line 3.role') });
    expect((await w.store.list('')).objects).toEqual([]);
  });

  it('stores a line that starts with a byte order mark as the item it parses to, without the mark', async () => {
    const w = world();
    const lines = [header, ...Array.from({ length: 80 }, (_, index) => message(index + 1))];
    // Every line of a chunk that is not all ASCII is decoded alone, which drops a leading BOM.
    lines[3] = `\uFEFF${lines[3]}`;
    await importText(w.services, `${lines.join('\n')}\n`);
    expect(await segmentsText(w.store, 'imp')).not.toContain('\uFEFF');
    const exported = (await exportText(w.services, 'imp')).split('\n');
    expect(exported[3]).toBe(message(3));
    expect(exported).toHaveLength(82);
  });

  it('refuses an id that is taken (409) and leaves the existing session as it was', async () => {
    const w = world();
    await w.sessions.create({ id: 'imp' });
    await w.sessions.append('imp', [{ type: 'message', role: 'user', content: 'mine' }]);
    const before = (await w.store.list('')).objects.map((object) => object.key);
    await expect(importText(w.services, [header, message(1)].join('\n'))).rejects.toMatchObject({
      code: 'session_exists',
    });
    expect((await w.store.list('')).objects.map((object) => object.key)).toEqual(before);
  });

  it.each([
    ['a segment', (key: string) => key.endsWith('.seg')],
    ['the config', (key: string) => key.endsWith('/session.json')],
    ['a delivery record', (key: string) => key.includes('/inbox_removed/')],
  ])('a failed put of %s leaves no session and sweeps what the import wrote', async (_name, failing) => {
    const source = world();
    const items: Item[] = Array.from({ length: 200 }, (_, index) => ({
      type: 'message',
      role: 'user',
      content: `message ${index} ${'z'.repeat(100)}`,
    }));
    await build(source, 's1', [
      { kind: 'append', items },
      { kind: 'notice', content: 'hello' },
    ]);
    const exported = await exportText(source.services, 's1');
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory).failWhen(({ operation, key }) => operation === 'put' && failing(key));
    await expect(importText(world(faulty).services, exported)).rejects.toThrow();
    await expect(world(memory).sessions.get('s1')).rejects.toMatchObject({ code: 'not_found' });
    expect((await memory.list(sessionPrefix('', 's1'))).objects.map((object) => object.key)).toEqual([]);
  });

  it('a refused import deletes only its own objects, not those of another import of the id in flight', async () => {
    const w = world();
    const other = `${sessionPrefix('', 'imp')}turn/g0000000000000aaaaaaaa/999999999999`;
    await w.store.put(other, '{}');
    const refused = importText(w.services, [header, message(1), message(3)].join('\n'));
    await expect(refused).rejects.toMatchObject({ code: 'invalid_request' });
    expect((await w.store.list('')).objects.map((object) => object.key)).toEqual([other]);
  });

  it('refuses a header that is not a session header (line 1)', async () => {
    const w = world();
    await expect(importText(w.services, message(1))).rejects.toThrow(/line 1/);
    await expect(importText(w.services, '')).rejects.toThrow(/line 1: the export is empty/);
  });

  it('imports a notice a direct writer named as the API would not, delivered as it was', async () => {
    const w = world();
    await w.sessions.create({ id: 'direct' });
    for (const name of ['a b', 'é~(1)', 'n'.repeat(200)]) {
      await w.store.put(`sessions/direct/inbox/${name}`, `content of ${name.length}`);
      await w.inbox.consume('direct', { turn: 1 });
    }
    const exported = await exportText(w.services, 'direct');
    const copy = world();
    await importText(copy.services, exported.replace('"id":"direct"', '"id":"copy"'));
    expect((await exportText(copy.services, 'copy')).replaceAll('"id":"copy"', '"id":"direct"')).toEqual(exported);
    expect((await copy.inbox.listDelivered('copy')).map((notice) => notice.name).sort()).toEqual(
      ['a b', 'é~(1)', 'n'.repeat(200)].sort(),
    );
  });

  it('refuses a notice name or stored_as longer than a posted name, in UTF-8 bytes, storing nothing', async () => {
    // A posted name is at most 200 characters of ASCII (docs/API.md, "Ids"); an import's may be a
    // direct writer's, of any characters, and is held to as many bytes, its `stored_as` to 10 more
    // (a slot, `.1` ... `.999999999`): the record's key and metadata then fit every store.
    const notice = (fields: { name: string; stored_as: string }) =>
      JSON.stringify({
        type: 'notice',
        ...fields,
        posted_at: '2026-01-01T00:00:00.000Z',
        delivered_at: '2026-01-01T00:00:00.000Z',
        turn: 1,
        content: 'x',
      });
    const cases: [{ name: string; stored_as: string }, string][] = [
      [{ name: 'n'.repeat(1024), stored_as: 'n1' }, 'line 3.name'],
      [{ name: 'é'.repeat(101), stored_as: 'n1' }, 'line 3.name'],
      [{ name: 'n1', stored_as: 's'.repeat(1024) }, 'line 3.stored_as'],
      [{ name: 'n1', stored_as: '€'.repeat(71) }, 'line 3.stored_as'],
    ];
    for (const [fields, field] of cases) {
      const w = world();
      const text = [headerLine('long'), messageLine(1), notice(fields), ''].join('\n');
      await expect(importText(w.services, text), field).rejects.toMatchObject({
        code: 'invalid_request',
        details: { field },
      });
      expect(await w.store.list('')).toMatchObject({ objects: [] });
    }
    const w = world();
    const longest = { name: `${'n'.repeat(197)}.md`, stored_as: `${'n'.repeat(197)}.999999999.md` };
    const text = [
      headerLine('long'),
      messageLine(1),
      notice(longest),
      notice({ name: 'é'.repeat(100), stored_as: '€'.repeat(70) }),
      '',
    ].join('\n');
    await expect(importText(w.services, text)).resolves.toMatchObject({ counts: { items: 1 } });
    expect((await w.inbox.listDelivered('long')).map((record) => record.stored_as).sort()).toEqual(
      [longest.stored_as, '€'.repeat(70)].sort(),
    );
  });

  it('refuses a posted_at or delivered_at of more than 9 fractional-second digits, storing nothing', async () => {
    // They go into the delivery record's metadata (S3 takes 2 KB of it): an ISO time of any
    // length would be a storage error there, not the line's 400.
    const notice = (times: { posted_at: string; delivered_at: string }) =>
      JSON.stringify({ type: 'notice', stored_as: 'n1', name: 'n1', ...times, turn: 1, content: 'x' });
    const long = `2026-01-01T00:00:00.${'1'.repeat(2000)}Z`;
    const ten = '2026-01-01T00:00:00.1234567891+05:30';
    const fine = '2026-01-01T00:00:00.000Z';
    const cases: [{ posted_at: string; delivered_at: string }, string][] = [
      [{ posted_at: long, delivered_at: fine }, 'line 3.posted_at'],
      [{ posted_at: fine, delivered_at: long }, 'line 3.delivered_at'],
      [{ posted_at: ten, delivered_at: fine }, 'line 3.posted_at'],
      [{ posted_at: fine, delivered_at: ten.replace('+05:30', 'Z') }, 'line 3.delivered_at'],
    ];
    for (const [times, field] of cases) {
      const w = world();
      const text = [headerLine('times'), messageLine(1), notice(times), ''].join('\n');
      await expect(importText(w.services, text), field).rejects.toMatchObject({
        code: 'invalid_request',
        details: { field },
      });
      expect(await w.store.list('')).toMatchObject({ objects: [] });
    }
    const w = world();
    const nine = { posted_at: '2026-01-01T00:00:00.123456789+05:30', delivered_at: '2026-01-01T00:00:01Z' };
    const text = [headerLine('times'), messageLine(1), notice(nine), ''].join('\n');
    await importText(w.services, text);
    expect(await w.inbox.listDelivered('times')).toMatchObject([nine]);
    expect(await exportText(w.services, 'times')).toBe(text);
  });

  it("exports a direct writer's posted-at of over 9 fractional digits as its upload time, which imports", async () => {
    const w = world();
    await w.sessions.create({ id: 'direct' });
    const precise = `2026-01-01T00:00:00.${'1'.repeat(12)}Z`;
    const posted = await w.store.put('sessions/direct/inbox/note', 'content', { metadata: { 'posted-at': precise } });
    await w.inbox.consume('direct', { turn: 1 });
    const exported = await exportText(w.services, 'direct');
    const [line] = exported.split('\n').filter((text) => text.includes('"type":"notice"'));
    expect(JSON.parse(line!).posted_at).toBe(posted!.uploaded.toISOString());
    const copy = world();
    await importText(copy.services, exported.replace('"id":"direct"', '"id":"copy"'));
    expect((await exportText(copy.services, 'copy')).replaceAll('"id":"copy"', '"id":"direct"')).toEqual(exported);
  });

  it('refuses a creation time later than now or before 1970, which no listing or inbox could serve', async () => {
    const w = world();
    for (const created_at of ['2300-01-01T00:00:00.000Z', '1969-12-31T23:59:59.000Z']) {
      const header = { ...JSON.parse(headerLine('when')), created_at };
      await expect(importText(w.services, `${JSON.stringify(header)}\n${message(1)}\n`)).rejects.toMatchObject({
        code: 'invalid_request',
        details: { field: 'line 1.created_at' },
      });
      expect(await w.store.list('sessions/when/')).toMatchObject({ objects: [] });
    }
  });
});

describe('session export and import: what a session carries besides its items', () => {
  const reply = (output: ModelOutputItem[]) =>
    recordingModel([], () => ({ output, usage: { input_tokens: 3, output_tokens: 2 } }));
  /** A session log's turn services (the model's `reply`) and its transfer services. */
  const turns = (store: ObjectStore, model: ReturnType<typeof reply>) => {
    const services = servicesFor(new SessionLog(store), store, model);
    const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, '') });
    return { services, transfer: { sessions: services.sessions, inbox, env: {} } as TransferServices };
  };

  it('carries the busy policy, the budget and the usage counted so far, so the budget goes on counting', async () => {
    const { services, transfer } = turns(
      new MemoryStore(),
      reply([{ type: 'message', role: 'assistant', content: 'ok' }]),
    );
    await services.sessions.create({ id: 'spent', on_busy: 'enqueue', budget: { max_turns: 1 } });
    await runTurn(services, 'spent', { input: 'hello' });
    await services.settle();
    const text = await exportText(transfer, 'spent');
    expect(JSON.parse(text.split('\n')[0]!)).toMatchObject({
      on_busy: 'enqueue',
      budget: { max_turns: 1 },
      ledger: { turns: 1, input_tokens: 3, output_tokens: 2 },
    });

    const copy = turns(new MemoryStore(), reply([]));
    await importText(copy.transfer, text.replace('"id":"spent"', '"id":"copy"'));
    const imported = await copy.services.sessions.get('copy');
    expect({ on_busy: imported.on_busy, budget: imported.budget, turns: imported.usage.turns }).toEqual({
      on_busy: 'enqueue',
      budget: { max_turns: 1 },
      turns: 1,
    });
    await expect(runTurn(copy.services, 'copy', { input: 'again' })).rejects.toMatchObject({
      code: 'budget_exhausted',
    });
    expect(await exportText(copy.transfer, 'copy')).toBe(text.replace('"id":"spent"', '"id":"copy"'));
  });

  it('keeps the usage totals of a session with no items (its only turn deleted)', async () => {
    const { services, transfer } = turns(
      new MemoryStore(),
      reply([{ type: 'message', role: 'assistant', content: 'ok' }]),
    );
    await services.sessions.create({ id: 'spent', budget: { max_turns: 1 } });
    await runTurn(services, 'spent', { input: 'hello' });
    await services.settle();
    await services.sessions.deleteTurn('spent', 1);
    await services.settle();
    const text = await exportText(transfer, 'spent');
    expect(JSON.parse(text.split('\n')[0]!)).toMatchObject({ budget: { max_turns: 1 }, ledger: { turns: 1 } });
    const copy = turns(new MemoryStore(), reply([]));
    await importText(copy.transfer, text.replace('"id":"spent"', '"id":"copy"'));
    expect((await copy.services.sessions.get('copy')).usage.turns).toBe(1);
    await expect(runTurn(copy.services, 'copy', { input: 'again' })).rejects.toMatchObject({
      code: 'budget_exhausted',
    });
    expect(await exportText(copy.transfer, 'copy')).toBe(text.replace('"id":"spent"', '"id":"copy"'));
  });

  it('imports what it exported when a model reused the call_id of a call still open', async () => {
    // A provider numbering its calls per response (call_0, ...): the first turn's call was never answered.
    const call: ModelOutputItem = { type: 'function_call', call_id: 'call_0', name: 'read', arguments: '{}' };
    const { services, transfer } = turns(new MemoryStore(), reply([call]));
    await services.sessions.create({ id: 'reused' });
    await runTurn(services, 'reused', { input: 'first' });
    await runTurn(services, 'reused', { input: 'second' });
    await services.settle();
    const text = await exportText(transfer, 'reused');
    expect(text.split('\n').filter((line) => line.includes('"call_0"'))).toHaveLength(2);
    const w = world();
    await expect(importText(w.services, text)).resolves.toMatchObject({ counts: { items: 4 } });
    expect(await exportText(w.services, 'reused')).toBe(text);
    // The open call takes its output as the turn's session does.
    await w.sessions.append('reused', [{ type: 'function_call_output', call_id: 'call_0', output: 'done' }]);
  });

  it('refuses two notices stored as one name (one would replace the other) and stores nothing', async () => {
    const w = world();
    const notice = (content: string) =>
      JSON.stringify({
        type: 'notice',
        stored_as: 'n1',
        name: 'n1',
        posted_at: '2026-01-01T00:00:00.000Z',
        delivered_at: '2026-01-01T00:00:00.000Z',
        turn: 1,
        content,
      });
    const text = [headerLine('dup'), messageLine(1), notice('first'), notice('second'), ''].join('\n');
    await expect(importText(w.services, text)).rejects.toMatchObject({
      code: 'invalid_request',
      details: { field: 'line 4.stored_as' },
    });
    expect(await w.store.list('sessions/dup/')).toMatchObject({ objects: [] });
  });
});
