import { expect, it } from 'vitest';
import { parseInRuns, parseJsonBytes } from '../../lib/session/split-json.ts';

it('parses a large view in runs inside workerd as JSON.parse does whole', () => {
  const items = Array.from({ length: 3_000 }, (_, index) => ({
    type: 'function_call_output',
    call_id: `c${index}`,
    output: `[{"a":${index}},{"b":"é😀"}]`.repeat(8),
    content: [{ type: 'input_text' }, { type: 'x' }],
  }));
  const text = JSON.stringify({ format: 'tailgate.view.v1', tail: { from_seq: 1, items }, created_at: 'a' });
  const bytes = new TextEncoder().encode(text);
  expect(bytes.length).toBeGreaterThan(2 * 48 * 1024);
  const parsed = parseInRuns(bytes, ['tail', 'items'], 48 * 1024);
  expect(parsed).toStrictEqual(JSON.parse(text));
  expect(JSON.stringify(parseJsonBytes(bytes, ['tail', 'items']))).toBe(text);
});
