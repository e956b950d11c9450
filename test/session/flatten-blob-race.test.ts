import { describe, expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { turnOf } from './rewind-simulation-suite.ts';

/**
 * A delete that flattens the history (lib/session/log/flatten.ts) while the packer packs the
 * generation it reads, moving outputs out of line into that generation's `blob/`: every output the
 * new generation's segments name out of line is stored where it reads it.
 */

/** `store`, running `meanwhile` once right after its first listing of a prefix `matches` accepts. */
function racing(store: ObjectStore, matches: (prefix: string) => boolean, meanwhile: () => Promise<unknown>) {
  let done = false;
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'list')
        return async (prefix: string, ...rest: unknown[]) => {
          const page = await (target.list as (...args: unknown[]) => Promise<unknown>).call(target, prefix, ...rest);
          if (!done && matches(prefix)) {
            done = true;
            await meanwhile();
          }
          return page;
        };
      const value = Reflect.get(target, prop);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const generationOf = async (store: ObjectStore, id: string) =>
  JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body)).generation as string;

const OUTPUT = 'a line of tool output\n'.repeat(20);

describe('a delete that flattens the history while the packer moves its outputs out of line', () => {
  it('leaves every output the new generation names readable', async () => {
    const store = new MemoryStore();
    const options = { packMinRecords: 100, keepRecords: 100, blobThreshold: 64, segmentTargetBytes: 100_000 };
    const log = (on: ObjectStore = store) => new SessionLog(on, options);
    await log().create({ id: 's' });
    for (let n = 1; n <= 8; n++) {
      await turnOf(log(), 's', `kept ${n}`);
      await turnOf(log(), 's', `gone ${n}`);
      await log().deleteTurn('s', n + 1);
    }
    for (let n = 1; n <= 4; n++) {
      const pair: Item[] = [
        { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ n }) },
        { type: 'function_call_output', call_id: `c${n}`, output: `${OUTPUT}${n}` },
      ];
      await log().append('s', pair);
    }
    await turnOf(log(), 's', 'kept 9');
    await turnOf(log(), 's', 'gone');
    const generation = await generationOf(store, 's');
    const packer = new SessionLog(store, { packMinRecords: 2, keepRecords: 1, blobThreshold: 64 });
    const blobs = (prefix: string) => prefix === `sessions/s/blob/${generation}/`;
    await log(racing(store, blobs, () => packer.pack('s'))).deleteTurn('s', 10);
    const packed = await store.list(`sessions/s/blob/${generation}/`, { limit: 100 });
    expect(packed.objects.length, 'outputs moved out of line meanwhile').toBeGreaterThan(0);
    const flat = await generationOf(store, 's');
    expect(flat).not.toBe(generation);
    const cold = log();
    const page = await cold.listItems('s', { limit: 1000 });
    const outputs = page.items
      .reverse()
      .filter((item) => item.type === 'function_call_output')
      .map((item) => (item as { output: string }).output);
    expect(outputs).toEqual([1, 2, 3, 4].map((n) => `${OUTPUT}${n}`));
    const begun = await cold.beginTurn('s', { input: [{ type: 'message', role: 'user', content: 'go on' }] });
    expect(begun.kind).toBe('claimed');
  });
});
