import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import type { Item } from '../../lib/items.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { sessionConfigKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { importLines, type TransferServices } from '../../lib/transfer.ts';
import { exportText, inOneChunk } from '../support/export-lines.ts';
import { SessionLog } from '../support/session-log.ts';
import { contents, turnOf } from './rewind-simulation-suite.ts';

const OPTIONS = { blobThreshold: 64, segmentTargetBytes: 2048, packMinRecords: 2, keepRecords: 1 };

const LIMITS = { maxItemBytes: 4096, maxNoticeBytes: 1024, maxLineBytes: 16384 };

/** Turns kept with a call and its large output appended each, and one deleted after each. */
async function deepen(log: SessionLog, id: string, from: number, rounds: number) {
  let turns = (await log.get(id)).counts.turns;
  for (let n = from; n < from + rounds; n++) {
    const call: Item[] = [
      { type: 'function_call', call_id: `${id}c${n}`, name: 'read', arguments: `{"n":${n}}` },
      { type: 'function_call_output', call_id: `${id}c${n}`, output: `${'out '.repeat(40)}${n}` },
    ];
    await log.append(id, call);
    await turnOf(log, id, `kept ${n}`);
    await turnOf(log, id, `gone ${n}`);
    turns += 2;
    await log.deleteTurn(id, turns);
    turns -= 1;
    await log.pack(id);
  }
}

describe('a flattened history elsewhere', () => {
  it('exports, imports, forks and is forked as it reads', async () => {
    const store = new MemoryStore();
    let offset = 0;
    const log = new SessionLog(store, { ...OPTIONS, clock: () => new Date(Date.now() + offset) });
    const services: TransferServices = {
      sessions: log,
      inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }),
      env: {},
    };
    await log.create({ id: 's' });
    await deepen(log, 's', 1, 12);
    const config = JSON.parse(new TextDecoder().decode((await store.get(sessionConfigKey('', 's')))!.body));
    expect(config.named?.length).toBeGreaterThan(0);
    const text = await exportText(services, 's');
    const items = await contents(log, 's');
    const imported = text.replace(/"id":"s"/, '"id":"t"');
    await importLines(services, inOneChunk(imported), LIMITS);
    expect(await contents(log, 't')).toEqual(items);
    expect((await exportText(services, 't')).split('\n').slice(1)).toEqual(text.split('\n').slice(1));
    // A fork of it, in its flattened turns, flattened in turn.
    await log.fork('s', { at_turn: 3, fields: { id: 'f' } });
    const forked = await contents(log, 'f');
    expect(forked).toEqual(items.slice(0, forked.length));
    await deepen(log, 'f', 100, 12);
    const fork = await contents(log, 'f');
    expect(fork.slice(0, forked.length)).toEqual(forked);
    await log.fork('f', { at_turn: 10, fields: { id: 'ff' } });
    expect(await contents(log, 'ff')).toEqual(fork.slice(0, (await contents(log, 'ff')).length));
    await log.delete('s');
    await log.delete('f');
    expect((await contents(log, 'ff')).length).toBeGreaterThan(forked.length);
    await deepen(log, 'ff', 200, 10);
    await log.delete('ff');
    await log.delete('t');
    // A lease later (a reference younger than that may be a fork still being written), swept again.
    offset += 3_600_000;
    for (const id of ['s', 'f', 'ff', 't']) await log.delete(id).catch(() => undefined);
    expect((await store.list('sessions/', { limit: 10 })).objects.map((object) => object.key)).toEqual([]);
  });
});
