import { Buffer } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../lib/hash.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { defineObjectStoreConformance } from './object-store-conformance.ts';

defineObjectStoreConformance('memory', () => new MemoryStore(), 'of the body');

const encoder = new TextEncoder();
function byBytes(a: string, b: string): number {
  const left = encoder.encode(a);
  const right = encoder.encode(b);
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    if (left[i] !== right[i]) return left[i]! - right[i]!;
  }
  return left.length - right.length;
}

describe('MemoryStore', () => {
  it("keeps its own copy of a Node Buffer body, whose slice would share the caller's memory", async () => {
    const store = new MemoryStore();
    const body = Buffer.from('hello');
    await store.put('k', body);
    body.fill(0x78);
    expect(new TextDecoder().decode((await store.get('k'))!.body)).toBe('hello');
  });

  it('gives each object returned the etag of its own body, read after the key was rewritten or deleted', async () => {
    const store = new MemoryStore();
    const put = (await store.put('k', 'a'))!;
    const [got, head, listed] = [(await store.get('k'))!, (await store.head('k'))!, (await store.list('')).objects[0]!];
    const part = (await store.get('k', { range: { suffix: 0 } }))!;
    await store.put('k', 'b');
    const rewritten = (await store.head('k'))!;
    await store.delete('k');
    // None was read before the rewrite: each is hashed now, of its own body ("a"), never of the key's.
    for (const object of [put, got, head, listed, part, { ...head }, JSON.parse(JSON.stringify(got))])
      expect(object.etag).toBe(sha256Hex(encoder.encode('a')));
    expect(rewritten.etag).toBe(sha256Hex(encoder.encode('b')));
    await store.put('k', 'b');
    expect(await store.put('k', 'c', { ifMatch: put.etag })).toBeNull();
    expect(await store.put('k', 'c', { ifMatch: rewritten.etag })).not.toBeNull();
  });

  it('lists any set of keys in UTF-8 byte order, paged, after puts and deletes (property)', async () => {
    const key = fc.string({
      unit: fc.constantFrom('a', 'B', '/', '0', '9', '_', '~', 'é', '\u{FB00}', '\u{1D11E}', '\u{FFFF}'),
      maxLength: 4,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.uniqueArray(key, { maxLength: 30 }),
        fc.array(fc.nat(29), { maxLength: 10 }),
        fc.constantFrom('', 'a', '/', 'é'),
        fc.integer({ min: 1, max: 7 }),
        async (keys, deletions, prefix, limit) => {
          const store = new MemoryStore();
          for (const name of keys) await store.put(name, name);
          const deleted = new Set(deletions.flatMap((index) => (index < keys.length ? [keys[index]!] : [])));
          await store.delete([...deleted]);
          const expected = keys.filter((name) => name.startsWith(prefix) && !deleted.has(name)).sort(byBytes);
          const listed: string[] = [];
          let cursor: string | undefined;
          do {
            const page = await store.list(prefix, cursor === undefined ? { limit } : { limit, cursor });
            expect(page.objects.length).toBeLessThanOrEqual(limit);
            listed.push(...page.objects.map((object) => object.key));
            cursor = page.cursor;
          } while (cursor !== undefined);
          expect(listed).toEqual(expected);
        },
      ),
      { numRuns: 150 },
    );
  });

  const count = 3001;
  const orders: Array<[string, (i: number) => number]> = [
    ['ascending', (i) => i],
    ['descending', (i) => count - 1 - i],
    ['scattered', (i) => (i * 1223) % count],
  ];
  it.each(orders)('keeps thousands of keys in order when inserted %s, across deletes', async (_label, order) => {
    const store = new MemoryStore();
    const name = (n: number) => `k/${String(n).padStart(5, '0')}`;
    for (let i = 0; i < count; i++) await store.put(name(order(i)), 'v');
    const deleted = new Set(Array.from({ length: 700 }, (_, i) => name((i * 37) % count)));
    await store.delete([...deleted]);
    await store.delete([...deleted].slice(0, 10));
    const expected = Array.from({ length: count }, (_, n) => name(n)).filter((key) => !deleted.has(key));
    const listed: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.list('k/', cursor === undefined ? {} : { cursor });
      listed.push(...page.objects.map((object) => object.key));
      cursor = page.cursor;
    } while (cursor !== undefined);
    expect(listed).toEqual(expected);
    const middle = await store.list('k/', { startAfter: name(1500), limit: 3 });
    expect(middle.objects.map((object) => object.key)).toEqual(expected.filter((key) => key > name(1500)).slice(0, 3));
    expect((await store.list('k/02')).objects.map((object) => object.key)).toEqual(
      expected.filter((key) => key.startsWith('k/02')),
    );
  });
});
