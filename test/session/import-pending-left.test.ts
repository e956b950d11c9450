import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText, headerLine, messageLine } from '../support/export-lines.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * An import answered 201 whose delete of `import/<g>/pending` failed leaves that object: once
 * the session has moved on (a write since), the same export sent again is 409 `session_exists`,
 * as any import of a taken id, not 201 naming a session that is no longer the export's, and the
 * object left is deleted then.
 */

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };

const world = (store: ObjectStore) => transferWorld(store);

async function* bytes(text: string): AsyncGenerator<Uint8Array> {
  yield new TextEncoder().encode(text);
}

async function pendingKeys(store: ObjectStore): Promise<string[]> {
  const page = await store.list('sessions/moved/import/', { limit: 100 });
  return page.objects.map((object) => object.key).filter((key) => key.endsWith('/pending'));
}

describe('an import answered with its pending object left, the session written since', () => {
  it('is 409 session_exists for the same export sent again, and the pending object goes', async () => {
    const exported = `${[headerLine('moved'), messageLine(1), messageLine(2)].join('\n')}\n`;
    const memory = new MemoryStore();
    const faulty = new FaultyStore(memory).failWhen(
      ({ operation, key }) => operation === 'delete' && key.includes('/import/'),
      { times: 1 },
    );
    const first = await importLines(world(faulty).services, bytes(exported), LIMITS);
    expect(first).toMatchObject({ id: 'moved', counts: { items: 2 } });
    expect(await pendingKeys(memory)).toHaveLength(1);

    const w = world(memory);
    await w.sessions.append('moved', [{ type: 'message', role: 'user', content: 'after the import' }]);
    const written = await exportText(w.services, 'moved');
    expect(written).toContain('after the import');

    await expect(importLines(w.services, bytes(exported), LIMITS)).rejects.toMatchObject({
      code: 'session_exists',
      details: { id: 'moved' },
    });
    expect(await exportText(w.services, 'moved')).toBe(written);
    expect(await pendingKeys(memory)).toEqual([]);
  });
});
