import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { MAX_PAGE_BYTES } from '../../lib/session/session-log.ts';
import { clientOnTailgate } from './server.ts';

// The OpenAI-compatible item lists hold about MAX_PAGE_BYTES a page, as the native pages do:
// items larger than MAX_PAGE_BYTES / limit come back in several pages, each listing each once.
const world = clientOnTailgate({ MAX_BODY_BYTES: String(16 * 1024 * 1024) });

const ITEM_CHARS = 700_000;
const message = (index: number) => ({
  type: 'message' as const,
  role: 'user' as const,
  content: `${index}:${'x'.repeat(ITEM_CHARS)}`,
});

interface Page {
  data: { id?: string }[];
  has_more: boolean;
  hasNextPage(): boolean;
  getNextPage(): Promise<Page>;
}

/** Every page from `first` on, checking each is within the cap and shorter than the limit. */
async function allPages(first: Page): Promise<string[][]> {
  const pages: string[][] = [];
  for (let page = first; ; page = await page.getNextPage()) {
    expect(page.data.length).toBeGreaterThan(0);
    expect(JSON.stringify(page.data).length).toBeLessThanOrEqual(MAX_PAGE_BYTES + ITEM_CHARS);
    pages.push(page.data.map((item) => item.id!));
    if (!page.hasNextPage()) return pages;
    expect(page.has_more).toBe(true);
  }
}

describe('item lists are capped by bytes', () => {
  it('pages a conversation of large items with limit=100, both orders, each item once', async () => {
    const conversation = await world.client.conversations.create({});
    const count = 14;
    for (let first = 0; first < count; first += 5) {
      const items = Array.from({ length: Math.min(5, count - first) }, (_, index) => message(first + index));
      await world.client.conversations.items.create(conversation.id, { items });
    }
    const ascending = (await allPages(
      (await world.client.conversations.items.list(conversation.id, { limit: 100, order: 'asc' })) as unknown as Page,
    )) as string[][];
    const descending = await allPages(
      (await world.client.conversations.items.list(conversation.id, { limit: 100 })) as unknown as Page,
    );
    const ids = Array.from({ length: count }, (_, index) => `msg_${conversation.id}_${index + 1}`);
    for (const pages of [ascending, descending]) {
      expect(pages.length).toBeGreaterThan(2);
      expect(Math.max(...pages.map((page) => page.length))).toBeLessThan(count);
    }
    expect(ascending.flat()).toEqual(ids);
    expect(descending.flat()).toEqual(ids.toReversed());
    // The first item is one page even when it alone is over the cap's share.
    const one = await world.client.conversations.items.list(conversation.id, { limit: 1, order: 'asc' });
    expect(one.data.map((item) => item.id)).toEqual([ids[0]]);
  });

  it("pages a response's input items with limit=100", async () => {
    const count = 9;
    const input = Array.from({ length: count }, (_, index) => message(index));
    const response = await world.client.responses.create({ model: 'echo', input });
    const sessionId = response.conversation!.id;
    const ids = Array.from({ length: count }, (_, index) => `msg_${sessionId}_${index + 1}`);
    const ascending = await allPages(
      (await world.client.responses.inputItems.list(response.id, { limit: 100, order: 'asc' })) as unknown as Page,
    );
    const descending = await allPages(
      (await world.client.responses.inputItems.list(response.id, { limit: 100 })) as unknown as Page,
    );
    expect(ascending.length).toBeGreaterThan(1);
    expect(ascending.flat()).toEqual(ids);
    expect(descending.flat()).toEqual(ids.toReversed());
  });

  it("refuses an input_items `after` that is not one of the response's input items (400)", async () => {
    const first = await world.client.responses.create({ model: 'echo', input: 'one' });
    const second = await world.client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'two' });
    const sessionId = first.conversation!.id;
    const listed = await world.client.responses.inputItems.list(second.id, { after: `msg_${sessionId}_3` });
    expect(listed.data).toEqual([]);
    for (const after of [`msg_${sessionId}_1`, `msg_${sessionId}_999`, 'nonsense']) {
      const refused = await world.client.responses.inputItems
        .list(second.id, { after })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ status: 400, code: 'invalid_request', param: 'after' });
    }
  });
});
