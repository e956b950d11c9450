import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { emptyAggregates } from '../../lib/strategies/aggregates.ts';
import { CorruptObjectError } from '../../lib/errors.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { chunkBody, layoutView, readView, viewBody, type ViewChunk } from '../../lib/session/log/view-chunks.ts';
import { viewKey } from '../../lib/session/keys.ts';
import type { LogItem } from '../../lib/session/records.ts';
import { storedView, storedViewChunk } from '../../lib/session/view-check.ts';
import { elidedOf, restoreItemsIn, storedItemJson } from '../../lib/session/view-items.ts';
import { VIEW_VERSION, type LogView } from '../../lib/session/view-records.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { bodyBytes, bodyLength } from '../../lib/store/object-store.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';

const scope = { keyPrefix: '', id: 's', generation: '' };
const TIMES = ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', 'é'];

/** An item of one of the shapes a view's tail holds, of each optional flag. */
const itemArbitrary = fc.oneof(
  fc.record({ type: fc.constant('message'), role: fc.constantFrom('user', 'assistant'), content: fc.string() }),
  fc.record(
    {
      type: fc.constant('function_call'),
      call_id: fc.constantFrom('a', 'b'),
      name: fc.constant('read'),
      arguments: fc.string(),
      compacted: fc.constant(true),
      behind: fc.constant(true),
    },
    { requiredKeys: ['type', 'call_id', 'name', 'arguments'] },
  ),
  fc.record(
    {
      type: fc.constant('function_call_output'),
      call_id: fc.constantFrom('a', 'b'),
      output: fc.string(),
      compacted: fc.constant(true),
    },
    { requiredKeys: ['type', 'call_id', 'output'] },
  ),
);

/** Items in seq order, runs of consecutive seqs and gaps, each created_at the one before or another. */
const tailArbitrary = fc
  .array(fc.tuple(itemArbitrary, fc.integer({ min: 1, max: 3 }), fc.constantFrom(...TIMES)), { maxLength: 40 })
  .map((drawn) => {
    let seq = 0;
    return drawn.map(([fields, step, createdAt]) => {
      seq += step;
      // The stored fields in their place: before the optional flags.
      const { compacted, behind, ...rest } = fields as Record<string, unknown>;
      return {
        ...rest,
        seq,
        created_at: createdAt,
        ...(compacted ? { compacted } : {}),
        ...(behind ? { behind } : {}),
      } as unknown as LogItem;
    });
  });

function viewOf(items: LogItem[], record: number, windowStart: number): LogView {
  return {
    format: 'tailgate.view.v1',
    v: VIEW_VERSION,
    policy: viewPolicy.version,
    record,
    last_seq: items.at(-1)?.seq ?? 0,
    aggregates: emptyAggregates(),
    keys: { count: 0, depth: 0, versions: {}, counts: {} },
    tail: { from_seq: 1, window_start: windowStart, items },
    created_at: TIMES[0]!,
  };
}

/** Stores `view` as a pack does (its chunk first, if it writes one), against `prior`; returns its layout. */
async function store(memory: MemoryStore, view: LogView, prior: ViewChunk | null | undefined, min: number) {
  const layout = layoutView(scope, view, prior, min);
  if (layout.chunk && layout.write) {
    const body = chunkBody(layout.chunk);
    // The chunk's bytes, counted before its body was built, are its body's.
    expect(layout.chunk.bytes).toBe(bodyLength(body));
    await memory.put(layout.chunk.key, body);
  }
  await memory.put(viewKey(scope, view.record), viewBody(view, layout));
  return layout;
}

/** What a process new to the session reads of the view of `record`. */
async function read(memory: MemoryStore, record: number) {
  const reader = logContext(memory, { viewPolicy, viewCacheBytes: 0 });
  return readView(reader, scope, viewKey(scope, record), record);
}

describe('the items of a stored view', () => {
  it('read back key for key as written, in a chunk or in the view, whatever their seqs and times', async () => {
    await fc.assert(
      fc.asyncProperty(tailArbitrary, fc.nat(40), fc.constantFrom(1, 200, 1e9), async (items, more, min) => {
        const memory = new MemoryStore();
        const first = viewOf(items, 1, Math.max(1, items[Math.floor(items.length / 2)]?.seq ?? 1));
        const layout = await store(memory, first, undefined, min);
        const read1 = await read(memory, 1);
        expect(JSON.stringify(read1)).toBe(JSON.stringify(first));
        // A later view against the first one's chunk: its items, some of them again, and more.
        if (items.length === 0) return;
        const later = items.filter((_, index) => index % 3 !== 1);
        const copied = later.at(-1) ?? items[0]!;
        for (let at = 0; at < more % 5; at++)
          later.push({ ...copied, seq: (later.at(-1)?.seq ?? 0) + 1 + (at % 2) } as LogItem);
        const second = viewOf(later, 2, later.at(-1)!.seq);
        await store(memory, second, layout.chunk, min);
        expect(JSON.stringify(await read(memory, 2))).toBe(JSON.stringify(second));
      }),
    );
  });

  it('are put back key for key as written, whether set on the parsed items or rebuilt (property)', () => {
    const ref = { sha256: 'a'.repeat(64), md5: 'b'.repeat(32), length: 3, head: 'h', tail: 't' };
    fc.assert(
      fc.property(tailArbitrary, fc.array(fc.boolean()), (items, refs) => {
        // Some outputs with an output_ref, which comes after the stored fields and before the flags.
        const written = items.map((item, index) => {
          if (item.type !== 'function_call_output' || !refs[index]) return item;
          const { compacted, ...rest } = item as LogItem & { compacted?: true };
          return { ...rest, output_ref: ref, ...(compacted ? { compacted } : {}) } as LogItem;
        });
        const stored = written.map((item, index) => storedItemJson(item, elidedOf(item, written[index - 1])));
        const holder = { items: JSON.parse(`[${stored.join(',')}]`) };
        restoreItemsIn(holder);
        expect(JSON.stringify(holder.items)).toBe(JSON.stringify(written));
      }),
    );
  });

  it('are stored without a created_at equal to the one before, nor a seq one after the one before', () => {
    const items = [1, 2, 3, 5].map(
      (seq) => ({ type: 'message', role: 'user', content: 'x', seq, created_at: TIMES[seq === 5 ? 1 : 0] }) as LogItem,
    );
    const view = viewOf(items, 1, 1);
    const body = new TextDecoder().decode(bodyBytes(viewBody(view, layoutView(scope, view, undefined, 1e9))));
    const stored = JSON.parse(body).tail.items;
    expect(stored).toEqual([
      { type: 'message', role: 'user', content: 'x', seq: 1, created_at: TIMES[0] },
      { type: 'message', role: 'user', content: 'x' },
      { type: 'message', role: 'user', content: 'x' },
      { type: 'message', role: 'user', content: 'x', seq: 5, created_at: TIMES[1] },
    ]);
  });

  it('are refused as corrupt when what they leave out cannot be put back', () => {
    const bytes = (items: unknown[]) =>
      new TextEncoder().encode(
        JSON.stringify({ ...viewOf([], 1, 1), last_seq: 9, tail: { from_seq: 1, window_start: 1, items } }),
      );
    const message = { type: 'message', role: 'user', content: 'x' };
    // The first item has none before it; an item after one that is not an item has none either.
    expect(() => storedView('k', bytes([message]), viewPolicy.version)).toThrow(CorruptObjectError);
    expect(() => storedView('k', bytes([{ ...message, seq: 1 }]), viewPolicy.version)).toThrow(CorruptObjectError);
    expect(() =>
      storedView('k', bytes([{ ...message, seq: 1, created_at: 'a' }, 7, message]), viewPolicy.version),
    ).toThrow(CorruptObjectError);
    const chunk = new TextEncoder().encode(
      JSON.stringify({ format: 'tailgate.view-chunk.v1', record: 1, items: [{ ...message, created_at: 'a' }] }),
    );
    expect(() => storedViewChunk('k', chunk, 1)).toThrow(CorruptObjectError);
    // A `__proto__` key stays a key of the item (and the item schema refuses it), not its prototype.
    const proto = new TextDecoder()
      .decode(
        bytes([
          { ...message, seq: 1, created_at: 'a' },
          { ...message, proto: {} },
        ]),
      )
      .replace('"proto"', '"__proto__"');
    expect(() => storedView('k', new TextEncoder().encode(proto), viewPolicy.version)).toThrow(CorruptObjectError);
    // Put back from the item before: the seq after its seq, its created_at.
    const view = storedView('k', bytes([{ ...message, seq: 4, created_at: 'a' }, message]), viewPolicy.version);
    expect(view!.tail!.items[1]).toEqual({ ...message, seq: 5, created_at: 'a' });
  });
});
