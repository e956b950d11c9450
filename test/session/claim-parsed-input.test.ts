import { describe, expect, it } from 'vitest';
import { type Item, markParsedItems } from '../../lib/items.ts';
import { claimInputChecks } from '../../lib/session/log/claim-input.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

// A turn's claim checks its input against itemSchema (lib/session/log/claim-input.ts) unless a
// route's schema gave every item of it and nothing rewrote them since (lib/items.ts markParsedItems).

const user = (content: string): Item => ({ type: 'message', role: 'user', content });
const broken = { type: 'message', role: 'nobody', content: 'x' } as unknown as Item;

async function setup() {
  const log = new SessionLog(new MemoryStore(), { clock: () => new Date('2026-01-01T00:00:00Z') });
  await log.create({ id: 's1' });
  return log;
}

describe("a turn claim's check of its input", () => {
  it('refuses an input no route parsed, and one with an item no route parsed, storing nothing', async () => {
    const log = await setup();
    for (const input of [[broken], [user('a'), broken], [...markParsedItems([user('b')]), broken]]) {
      const before = claimInputChecks();
      const error = await log.beginTurn('s1', { input }).catch((caught: unknown) => caught);
      expect((error as Error).message).toMatch(/^session log invariant: /);
      expect(claimInputChecks()).toBe(before + 1);
    }
    expect((await log.listItems('s1', { limit: 10 })).items).toEqual([]);
  });

  it('is skipped for an input a route parsed, and runs for any other', async () => {
    const log = await setup();
    const before = claimInputChecks();
    const begun = await log.beginTurn('s1', { input: markParsedItems([user('a'), user('b')]) });
    expect(claimInputChecks()).toBe(before);
    expect(begun.kind).toBe('claimed');
    if (begun.kind !== 'claimed') return;
    await log.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {} });
    await log.beginTurn('s1', { input: [user('c')] });
    expect(claimInputChecks()).toBe(before + 1);
    const page = await log.listItems('s1', { limit: 10 });
    expect(page.items.map((item) => (item as { content: string }).content).reverse()).toEqual(['a', 'b', 'c']);
  });
});
