import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import type { GetOptions, StoredObject } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SIGNING_KEY } from '../http/http-suite.ts';

// A response's history index entry goes where another conversation's entry stands when no resend
// continues that one any more (lib/openai/history-index.ts, writeEntry). Whether one does reads
// the other session's turns; a delete of it between those reads leaves it continued by nothing:
// the entry is written all the same, not lost to a not_found.

const TOKEN = 'index-holder-token';
const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo' };
const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };

/** Once `held` is set, the first read of one of its session's turns after a read of `held` runs `hook`. */
class DeleteDuringCheck extends MemoryStore {
  held: { key: string; session: string; hook: () => Promise<void> } | undefined;
  #read = false;
  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    const found = await super.get(key, options);
    const held = this.held;
    if (held && key === held.key) this.#read = true;
    else if (held && this.#read && key.startsWith(`sessions/${held.session}/turn/`)) {
      this.held = undefined;
      await held.hook();
    }
    return found;
  }
}

describe('the history index entry of a response', () => {
  it('is written over the entry of a conversation deleted while its turns were read', async () => {
    const store = new DeleteDuringCheck();
    const logged: unknown[][] = [];
    const tasks: Promise<unknown>[] = [];
    const app = createApp({
      store: () => store,
      readEnvironment: () => environment,
      log: (...line) => void logged.push(line),
      info: () => undefined,
      logLine: () => undefined,
      afterResponse: (task) => void tasks.push(task),
    });
    const drain = async () => {
      while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    };
    const call = (method: string, path: string, body?: unknown) =>
      app.request(path, { method, headers, ...(body ? { body: JSON.stringify(body) } : {}) }, environment);
    const respond = async (input: unknown[]) =>
      (await (await call('POST', '/v1/responses', { model: 'echo', input })).json()) as any;
    const user = (text: string) => ({ role: 'user', content: text });
    const first = await respond([user('hi')]);
    const held = first.conversation.id as string;
    const second = await respond([user('hi'), ...first.output, user('more')]);
    expect(second.conversation.id).toBe(held);
    // A native turn after it: whether a resend of that history continues it reads the turns since.
    expect((await call('POST', `/v1/sessions/${held}/turns`, { input: 'native' })).status).toBe(200);
    await drain();
    const indexed = (await store.list('openai/history/')).objects.map((object) => object.key);
    expect(indexed).toHaveLength(1);
    const key = indexed[0]!;
    expect(JSON.parse(new TextDecoder().decode((await store.get(key))!.body))).toMatchObject({ session_id: held });
    store.held = {
      key,
      session: held,
      hook: async () => void expect((await call('DELETE', `/v1/sessions/${held}`)).status).toBe(204),
    };
    // The same history again: a conversation of its own, whose entry is written under that key.
    const other = await respond([user('hi'), ...first.output, user('more')]);
    await drain();
    expect(store.held).toBeUndefined();
    expect(other.conversation.id).not.toBe(held);
    expect(logged).toEqual([]);
    const entry = JSON.parse(new TextDecoder().decode((await store.get(key))!.body));
    expect(entry).toMatchObject({ session_id: other.conversation.id });
  });
});
