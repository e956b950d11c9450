import fc from 'fast-check';
import { expect, it } from 'vitest';
import { itemPage } from '../../lib/openai/compaction.ts';

// Paging a conversation's items by the cursor of each page's last item lists every item and
// the compaction item once, in order, whatever the page size.
it('pages through every position once, in order, both ways', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 30 }),
      fc.option(fc.integer({ min: 2, max: 31 }), { nil: undefined }),
      fc.integer({ min: 1, max: 6 }),
      fc.boolean(),
      (total, start, limit, ascending) => {
        const compactionAt = start !== undefined && start <= total + 1 ? start - 0.5 : undefined;
        const all = Array.from({ length: total }, (_, index) => index + 1);
        if (compactionAt !== undefined) all.push(compactionAt);
        all.sort((a, b) => (ascending ? a - b : b - a));
        const listed: number[] = [];
        let after: number | undefined;
        for (let pages = 0; pages <= all.length + 1; pages += 1) {
          const page = itemPage({ total, limit, ascending, ...(after !== undefined ? { after } : {}), compactionAt });
          expect(page.positions.length).toBeLessThanOrEqual(limit);
          listed.push(...page.positions);
          if (!page.hasMore) break;
          after = page.positions.at(-1);
        }
        expect(listed).toEqual(all);
      },
    ),
  );
});
