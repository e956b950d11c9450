import { describe, expect, it } from 'vitest';
import { allParsedItems, type Item, markParsedItems } from '../../lib/items.ts';
import { appendItemChecks } from '../../lib/session/log/append.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { SessionLog } from '../support/session-log.ts';

// An append's items are checked against itemSchema (lib/session/log/append.ts) unless a route's
// schema gave them and nothing rewrote them since (lib/items.ts markParsedItems).

const user = (content: string): Item => ({ type: 'message', role: 'user', content });

async function setup() {
  const log = new SessionLog(new MemoryStore(), { clock: () => new Date('2026-01-01T00:00:00Z') });
  await log.create({ id: 's1' });
  return log;
}

describe("an append's check of its items", () => {
  it('is skipped for items a route parsed, and runs for any other', async () => {
    const log = await setup();
    const before = appendItemChecks();
    await log.append('s1', markParsedItems([user('a'), user('b')]));
    expect(appendItemChecks()).toBe(before);
    await log.append('s1', [user('c')]);
    expect(appendItemChecks()).toBe(before + 1);
    // One item not marked among marked ones: all are checked.
    await log.append('s1', [...markParsedItems([user('d')]), user('e')]);
    expect(appendItemChecks()).toBe(before + 2);
    const page = await log.listItems('s1', { limit: 10 });
    expect(page.items.map((item) => (item as { content: string }).content).reverse()).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
    ]);
  });

  it('still refuses what breaks itemSchema unless marked, and an empty list', async () => {
    const log = await setup();
    const broken = { type: 'message', role: 'nobody', content: 'x' } as unknown as Item;
    for (const items of [[broken], [...markParsedItems([user('a')]), broken], markParsedItems([])]) {
      const error = await log.append('s1', items).catch((caught: unknown) => caught);
      expect((error as Error).message).toMatch(/^session log invariant: /);
    }
    expect((await log.listItems('s1', { limit: 10 })).items).toEqual([]);
  });

  it('runs for items whose attachments were stored (new objects), not for those left as they were', async () => {
    const log = await setup();
    const image: Item = {
      type: 'message',
      role: 'user',
      content: [{ type: 'input_image', image_url: dataUrl('image/png', pngBytes(4, 3)) }],
    };
    const plain = user('plain');
    const stored = await log.storeAttachments('s1', markParsedItems([plain, image]));
    expect(stored[0]).toBe(plain);
    expect(stored[1]).not.toBe(image);
    expect(allParsedItems([stored[0]!])).toBe(true);
    expect(allParsedItems(stored)).toBe(false);
    const before = appendItemChecks();
    await log.append('s1', stored);
    expect(appendItemChecks()).toBe(before + 1);
    const [appended] = (await log.listItems('s1', { limit: 1 })).items;
    expect(appended).toMatchObject({
      content: [{ type: 'input_image', media_type: 'image/png', width: 4, height: 3 }],
    });
  });
});
