import { describe, expect, it } from 'vitest';
import { turnUsage } from '../../lib/ledger/usage.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { importLines } from '../../lib/transfer.ts';
import { exportText, headerLine, inOneChunk, messageLine, NOTICE } from '../support/export-lines.ts';
import { type HeldCall, HeldStore } from '../support/held-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { transferWorld } from '../support/transfer-world.ts';

/**
 * An import finishing (its config created, its delivery records, config read and index entry to
 * come) while clients use the session: one takes a turn, another deletes that newest turn, moving
 * the session to another generation of the same incarnation, a third reads it. The import is the
 * session's still: it finishes wholly and is answered 201; the delete acts on the session as any.
 */

const LIMITS = { maxItemBytes: 2048, maxNoticeBytes: 1024, maxLineBytes: 8192 };
const ID = 'busy';

const world = (store: ObjectStore) => transferWorld(store);

const LINES = [headerLine(ID), messageLine(1), messageLine(2), NOTICE];
const EXPORTED = `${LINES.join('\n')}\n`;

/** Where the import is held while the clients act: its delivery record's put, or the config read after it. */
const HOLDS: [string, (recorded: { put: boolean }) => (call: HeldCall) => boolean][] = [
  [
    'at its delivery record',
    (recorded) =>
      ({ operation, keys }) =>
        (recorded.put ||= operation === 'put' && keys[0]!.includes('/inbox_removed/')),
  ],
  [
    'at its config read after its records',
    (recorded) =>
      ({ operation, keys }) => {
        if (operation === 'put' && keys[0]!.includes('/inbox_removed/')) recorded.put = true;
        return recorded.put && operation === 'get' && keys[0]!.endsWith('/session.json');
      },
  ],
];

describe.each(await memoryAndFileStores('import-delete-turn'))('an import finishing (%s)', (_name, makeStore) => {
  it.each(HOLDS)('while a turn is taken and deleted, held %s: finishes wholly, 201', async (_where, when) => {
    const store = makeStore();
    const held = new HeldStore(store);
    const hold = held.hold(when({ put: false }));
    const importing = importLines(world(held).services, inOneChunk(EXPORTED), LIMITS);
    importing.catch(() => undefined);
    await hold.reached;

    // One client takes a turn on the session (visible since its config), another deletes it.
    const turner = world(store);
    const begun = await turner.sessions.beginTurn(ID, { input: [{ type: 'message', role: 'user', content: 'go' }] });
    if (begun.kind !== 'claimed') throw new Error(`turn not claimed: ${begun.kind}`);
    const usage = turnUsage({ input_tokens: 10, output_tokens: 5 }, { input: 1, cached_input: 0.5, output: 4 });
    await turner.sessions.completeTurn(begun.turn, { status: 'completed', output: [], receipt: {}, usage });
    const deleter = world(store);
    const after = await deleter.sessions.deleteTurn(ID, 1);
    expect(after).toMatchObject({ id: ID, counts: { items: 2, turns: 0 } });
    hold.release();
    // A reader while the import ends.
    const reading = world(store).sessions.get(ID);

    await expect(importing).resolves.toMatchObject({ id: ID, counts: { items: 2, turns: 0 } });
    await expect(reading).resolves.toMatchObject({ id: ID });
    const exported = (await exportText(world(store).services, ID)).split('\n');
    // Every line of the export there; the header's totals count the deleted turn, as a delete keeps them.
    expect(exported.slice(1)).toEqual(EXPORTED.split('\n').slice(1));
    expect((await world(store).inbox.listDelivered(ID)).map((notice) => notice.name)).toEqual(['note']);
    const listed = await store.list(`sessions/${ID}/import/`, { limit: 1000 });
    expect(listed.objects).toEqual([]);
    const sessions = await world(store).sessions.listSessions({ limit: 10 });
    expect(sessions.sessions.map((session) => session.id)).toEqual([ID]);
  });
});
