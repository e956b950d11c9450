import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nearItem, outcome, validFields } from '../support/near-items.ts';
import { validateStored } from '../../lib/session/records.ts';
import { isPlainViewItem, validateView } from '../../lib/session/view-parse.ts';
import { VIEW_VERSION, viewItemSchema, viewSchema } from '../../lib/session/view-records.ts';

const ref = { sha256: 'a'.repeat(64), bytes: 10, md5: 'b'.repeat(32), head: 'h', tail: 't' };
/** Valid values of a view item's fields. */
const valid = {
  ...validFields,
  compacted: fc.constant(true),
  behind: fc.constant(true),
  output_ref: fc.constant(ref),
};
/** Objects near a view item. */
const nearViewItem = nearItem(
  [
    ['type', 'role', 'content', 'seq', 'created_at'],
    ['type', 'call_id', 'name', 'arguments', 'seq', 'created_at', 'compacted', 'behind'],
    ['type', 'call_id', 'output', 'seq', 'created_at', 'output_ref', 'compacted', 'behind'],
    ['type', 'call_id', 'name', 'arguments', 'seq', 'created_at'],
    ['type', 'call_id', 'output', 'seq', 'created_at'],
  ],
  valid,
);

/** A view around `items` (its other fields valid, or `tail` null). */
const view = (items: unknown, tail = true) => ({
  format: 'tailgate.view.v1',
  v: VIEW_VERSION,
  policy: 'p',
  record: 3,
  last_seq: 10,
  aggregates: { tool_calls: 0, tool_outputs: 0, repeat_flags: '', repeated: {}, images: 0, image_order: '' },
  keys: { count: 0, depth: 0, versions: {} },
  tail: tail ? { from_seq: 1, window_start: 1, items } : null,
  created_at: 'now',
});

describe('validateView', () => {
  it('takes a plain item as the item schema does, key for key, and nothing the schema refuses (property)', () => {
    fc.assert(
      fc.property(fc.oneof({ weight: 4, arbitrary: nearViewItem }, fc.jsonValue()), (value) => {
        if (!isPlainViewItem(value)) return;
        const parsed = viewItemSchema.safeParse(value);
        expect(parsed.success).toBe(true);
        expect(JSON.stringify(parsed.data)).toBe(JSON.stringify(value));
      }),
      { numRuns: 10000 },
    );
  });

  it('gives what the view schema gives any view: the same view, keys in order, or the same error (property)', () => {
    const anyView = fc.oneof(
      { weight: 4, arbitrary: fc.array(nearViewItem, { maxLength: 4 }).map((items) => view(items)) },
      fc.constant(view([], false)),
      fc.jsonValue().map((items) => view(items)),
      fc.jsonValue(),
    );
    fc.assert(
      fc.property(anyView, (value) => {
        const expected = outcome(() => validateStored('k.view', value, viewSchema));
        expect(outcome(() => validateView('k.view', value))).toEqual(expected);
      }),
      { numRuns: 3000 },
    );
  });

  it('checks the plain shape without the schema, and sends another to it', () => {
    const plain = { type: 'function_call', call_id: 'c', name: 'read', arguments: '{}', seq: 3, created_at: 'a' };
    expect(isPlainViewItem(plain)).toBe(true);
    expect(isPlainViewItem({ ...plain, compacted: true, behind: true })).toBe(true);
    // Valid, but not the fast path's: content parts, an out-of-line output, another key order.
    expect(
      isPlainViewItem({
        type: 'message',
        role: 'user',
        content: [{ type: 'input_text', text: 'x' }],
        seq: 1,
        created_at: 'a',
      }),
    ).toBe(false);
    expect(
      isPlainViewItem({
        type: 'function_call_output',
        call_id: 'c',
        output: '',
        seq: 1,
        created_at: 'a',
        output_ref: ref,
      }),
    ).toBe(false);
    const reordered = { seq: 3, type: 'function_call', call_id: 'c', name: 'read', arguments: '{}', created_at: 'a' };
    expect(isPlainViewItem(reordered)).toBe(false);
    expect(validateView('k.view', view([reordered]))).toEqual(viewSchema.parse(view([plain])));
  });
});
