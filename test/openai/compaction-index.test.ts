import type OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { StorageError } from '../../lib/errors.ts';
import type { Body, PutOptions } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { clientInProcess, long } from './server.ts';

// responses.compact indexes its compaction item's conversation as the compaction found it: a
// turn taken between the compaction's record and that index is none the item's holder has seen.
const TOKEN = 'compaction-index-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

/**
 * A memory store that runs `afterCompact` once a compaction's record has landed (the one that
 * ends its claim: no lease), before its put answers.
 */
class CompactHookStore extends MemoryStore {
  afterCompact: (() => Promise<void>) | undefined;

  override async put(...args: Parameters<MemoryStore['put']>) {
    const landed = await super.put(...args);
    const hook = this.afterCompact;
    const body = args[1];
    const text = typeof body === 'string' ? body : body instanceof Uint8Array ? new TextDecoder().decode(body) : '';
    if (hook && text.includes('"kind":"compact"') && !text.includes('"lease_expires_at"')) {
      this.afterCompact = undefined;
      await hook();
    }
    return landed;
  }
}

describe('responses.compact: the compaction item continues what the compaction summarized', () => {
  it('a turn taken before the item was indexed is not continued by a resend of the item', async () => {
    const store = new CompactHookStore();
    const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {} });
    const client = clientInProcess(app, TOKEN);
    const first = await client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    store.afterCompact = async () => {
      await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'unseen' });
    };
    const compacted = await client.responses.compact({ model: 'echo', previous_response_id: first.id });
    expect(store.afterCompact).toBeUndefined();
    const compaction = compacted.output.find((item) => item.type === 'compaction') as ResponseCompactionItem;

    const next = await client.responses.create({
      model: 'echo',
      input: [compaction, { role: 'user', content: 'go on' }] as OpenAI.Responses.ResponseInputItem[],
    });
    // The session took "unseen" since: the resend starts a new conversation from the summary.
    expect(next.conversation!.id).not.toBe(sessionId);
    const items = await client.conversations.items.list(next.conversation!.id, { order: 'asc' });
    const texts = items.data.flatMap((item) => (item.type === 'message' ? [(item.content[0] as any).text] : []));
    expect(texts).not.toContain('unseen');
    expect(texts.slice(-2)).toEqual(['go on', 'echo: go on']);
  });
});

/** What the app logs, and the work it left running after its responses (awaited by `settle`). */
function watchedApp(store: MemoryStore) {
  const logged: string[] = [];
  const tasks: Promise<unknown>[] = [];
  const app = createApp({
    store: () => store,
    readEnvironment: () => environment,
    log: (message) => logged.push(message),
    afterResponse: (task) => tasks.push(task),
  });
  const client = clientInProcess(app, TOKEN);
  const settle = async () => {
    for (let done = 0; done < tasks.length; done = tasks.length) await Promise.allSettled(tasks.slice(done));
  };
  return { logged, client, settle, app };
}

/**
 * Fails every read of a session's config once `failConfig` is set; runs `afterConfigRead` once,
 * after the next read of one has answered.
 */
class ConfigFaults extends CompactHookStore {
  failConfig = false;
  afterConfigRead: (() => Promise<void>) | undefined;
  override async get(...args: Parameters<MemoryStore['get']>) {
    if (!args[0].endsWith('/session.json')) return super.get(...args);
    if (this.failConfig) throw new StorageError('injected: config read failed');
    const found = await super.get(...args);
    const hook = this.afterConfigRead;
    this.afterConfigRead = undefined;
    await hook?.();
    return found;
  }
}

describe('POST /v1/sessions/:id/compact: a compaction whose kept items cannot be indexed', () => {
  it('is no failure to log when its session was deleted meanwhile', async () => {
    const store = new ConfigFaults();
    const { logged, client, app, settle } = watchedApp(store);
    const first = await client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'some years ago' });
    // Deleted once the index has read the session, before it reads the items the compaction kept.
    store.afterCompact = async () => {
      store.afterConfigRead = async () => {
        await client.conversations.delete(sessionId);
      };
    };
    const compacted = await app.request(`/v1/sessions/${sessionId}/compact`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ keep_tokens: 10 }),
    });
    expect(store.afterConfigRead).toBeUndefined();
    expect(compacted.status).toBe(200);
    // It kept the newest item, which the index reads after the session.
    expect(await compacted.json()).toMatchObject({ compacted: true, context: { start_seq: 4 } });
    await settle();
    // The work left after the response (a pack) finds the session gone too: one line of its own.
    expect(logged.filter((message) => message.includes('could not index'))).toEqual([]);
  });
});

describe('responses.compact: a compaction whose index cannot be written', () => {
  it('is no failure to log when its conversation was deleted meanwhile', async () => {
    const store = new CompactHookStore();
    const { logged, client } = watchedApp(store);
    const first = await client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    store.afterCompact = async () => {
      await client.conversations.delete(sessionId);
    };
    const compacted = await client.responses.compact({ model: 'echo', previous_response_id: first.id });
    expect(store.afterCompact).toBeUndefined();
    expect(compacted.output).toMatchObject([{ type: 'compaction', id: `cmp_${sessionId}_3` }]);
    expect(logged).toEqual([]);
  });

  it('is logged when its conversation could not be read', async () => {
    const store = new ConfigFaults();
    const { logged, client } = watchedApp(store);
    const first = await client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    store.afterCompact = async () => {
      store.failConfig = true;
    };
    const compacted = await client.responses.compact({ model: 'echo', previous_response_id: first.id });
    store.failConfig = false;
    expect(compacted.output).toMatchObject([{ type: 'compaction' }]);
    // Named by the request that compacted (its x-request-id).
    expect(logged).toContainEqual(
      expect.stringMatching(/^tailgate: could not index a compaction \(req_[0-9a-f]{24}\)$/),
    );
  });
});

/** Runs `completed` once, when a turn's completion has landed (before its put answers), with its body. */
class CompletionHookStore extends MemoryStore {
  completed: ((done: string) => Promise<void>) | undefined;

  override async put(key: string, body: Body, options?: PutOptions) {
    const landed = await super.put(key, body, options);
    const hook = this.completed;
    const text = typeof body === 'string' ? body : body instanceof Uint8Array ? new TextDecoder().decode(body) : '';
    if (hook && key.endsWith('.done') && text.includes('"status":"completed"')) {
      this.completed = undefined;
      await hook(text);
    }
    return landed;
  }
}

describe("a background turn's compaction, its conversation deleted before it is indexed", () => {
  it('is no failure to log', async () => {
    const store = new CompletionHookStore();
    const { logged, client, settle } = watchedApp(store);
    const context_management = [{ type: 'compaction' as const, compact_threshold: 100 }];
    const first = await client.responses.create({ model: 'echo', input: long('alpha'), context_management });
    const sessionId = first.conversation!.id;
    let completion = '';
    store.completed = async (done) => {
      await client.conversations.delete(sessionId);
      completion = done;
    };
    await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: long('bravo'),
      context_management,
      background: true,
    });
    await settle();
    // The turn compacted its session, and its completion landed before the delete.
    expect(JSON.parse(completion)).toMatchObject({
      status: 'completed',
      context: { start_seq: 3, summary: expect.any(String) },
    });
    expect(logged).toEqual([]);
  });
});
