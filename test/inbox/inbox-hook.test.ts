import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { inboxHook, noticeMessages } from '../../lib/inbox/inbox-hook.ts';
import type { PromptItem } from '../../lib/items.ts';

describe('inboxHook', () => {
  it('appends notices as synthetic user messages, marked pending for the preview', () => {
    const items: PromptItem[] = [{ type: 'message', role: 'user', content: 'hi', seq: 1 }];
    expect(inboxHook([{ content: 'budget low' }])(items)).toEqual([
      items[0],
      { type: 'message', role: 'user', content: 'budget low', synthetic: 'inbox' },
    ]);
    expect(noticeMessages([{ content: 'x' }], { pending: true })).toEqual([
      { type: 'message', role: 'user', content: 'x', synthetic: 'inbox', pending: true },
    ]);
  });

  it('keeps the input untouched and its order, adding the notices last', () => {
    const item = fc.record({
      type: fc.constant('message' as const),
      role: fc.constantFrom('user' as const, 'assistant' as const),
      content: fc.string(),
    });
    fc.assert(
      fc.property(fc.array(item, { maxLength: 6 }), fc.array(fc.string(), { maxLength: 4 }), (items, contents) => {
        const before = structuredClone(items);
        const result = inboxHook(contents.map((content) => ({ content })))(items);
        expect(items).toEqual(before);
        expect(result.slice(0, items.length)).toEqual(items);
        expect(
          result.slice(items.length).map((message) => (message.type === 'message' ? message.content : null)),
        ).toEqual(contents);
      }),
      { numRuns: 100 },
    );
  });
});
