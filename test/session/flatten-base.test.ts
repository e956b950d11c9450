import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import type { Item } from '../../lib/items.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { listAll } from '../../lib/store/object-store.ts';
import { exportLines, importLines, type TransferServices } from '../../lib/transfer.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

/**
 * A session whose flattenings read its first generation as a fork (lib/session/log/flatten.ts):
 * its history is long before its deletes begin, so the generations above it hold fewer items.
 */

const OPTIONS = { packMinRecords: 2, keepRecords: 1, segmentTargetBytes: 2048, blobThreshold: 256 };
const LIMITS = { maxItemBytes: 8192, maxNoticeBytes: 1024, maxLineBytes: 65536 };

async function exportText(services: TransferServices, id: string): Promise<string> {
  let text = '';
  for await (const lines of await exportLines(services, id)) text += lines;
  return text;
}
async function* chunks(text: string): AsyncGenerator<Uint8Array> {
  yield new TextEncoder().encode(text);
}

const configOf = async (store: MemoryStore, id: string) =>
  JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', id)))!.body));

describe('a session flattened again and again over a long first generation', () => {
  it('keeps reading that one as a fork, exports, imports, forks and leaves nothing once deleted', async () => {
    const store = new MemoryStore();
    const log = new SessionLog(store, OPTIONS);
    const services: TransferServices = {
      sessions: log,
      inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }),
      env: {},
    };
    await log.create({ id: 's' });
    const first = (await configOf(store, 's')).generation;
    for (let n = 1; n <= 60; n++) {
      const pair: Item[] = [
        { type: 'function_call', call_id: `c${n}`, name: 'read', arguments: JSON.stringify({ n }) },
        { type: 'function_call_output', call_id: `c${n}`, output: `${'line\n'.repeat(80)}${n}` },
      ];
      await log.append('s', pair);
    }
    await log.pack('s');
    let flattenedOverBase = 0;
    for (let n = 1; n <= 40; n++) {
      await turnOf(log, 's', `kept ${n}`);
      await turnOf(log, 's', `gone ${n}`);
      await log.deleteTurn('s', (await log.get('s')).counts.turns);
      await log.pack('s');
      const config = await configOf(store, 's');
      const own = (config.fork_of ?? []).filter((point: { id: string }) => point.id === 's');
      expect(config.fork_of?.length ?? 0).toBeLessThanOrEqual(8);
      if (own.length === 1 && own[0].generation === first) flattenedOverBase += 1;
      if (n === 20) await log.fork('s', { at_turn: 10, fields: { id: 'branch' } });
    }
    expect(flattenedOverBase).toBeGreaterThan(0);
    const items = await contents(log, 's');
    expect(items.slice(-2)).toEqual(['kept 40', 're kept 40']);
    expect((await log.listForks('s', { limit: 100 })).forks.map((fork) => fork.id)).toEqual(['branch']);
    const branch = await contents(log, 'branch');
    expect(branch).toEqual(items.slice(0, branch.length));
    const text = await exportText(services, 's');
    await importLines(services, chunks(text.replace(/"id":"s"/, '"id":"t"')), LIMITS);
    expect(await contents(log, 't')).toEqual(items);
    expect((await exportText(services, 't')).split('\n').slice(1)).toEqual(text.split('\n').slice(1));
    // A fork of the flattened generation reading the first one, and a flattened fork of it.
    await log.fork('s', { at_turn: 40, fields: { id: 'f' } });
    for (let n = 1; n <= 12; n++) {
      await turnOf(log, 'f', `f kept ${n}`);
      await turnOf(log, 'f', `f gone ${n}`);
      await log.deleteTurn('f', (await log.get('f')).counts.turns);
    }
    const fork = await contents(log, 'f');
    expect(fork.slice(0, items.length)).toEqual(items);
    expect(fork.length).toBe(items.length + 24);
    await log.delete('s');
    expect(await contents(log, 'f')).toEqual(fork);
    expect(await contents(log, 'branch')).toEqual(branch);
    await log.delete('f');
    await log.delete('branch');
    expect(await contents(log, 't')).toEqual(items);
    await log.delete('t');
    expect((await listAll(store, 'sessions/')).map((object) => object.key)).toEqual([]);
  });
});
