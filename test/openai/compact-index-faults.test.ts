import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import type { Body, GetOptions, ObjectInfo, PutOptions, StoredObject } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { compactedInBackground, startTailgate, tailgateGet, tailgatePost, TOKEN } from './server.ts';

// A compaction's index entry is written after the compaction landed (lib/openai/compact-response.ts):
// a storage failure while writing it leaves the client's next step a new conversation, but never
// turns the compaction, which happened and was charged, into an error answer.

/**
 * Once armed, fails every session config read after a compaction's record landed (the one that
 * moves the context and ends the compaction's claim: a record without a lease).
 */
class AfterCompactFaults extends MemoryStore {
  armed = false;
  landed = false;
  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const stored = await super.put(key, body, options);
    const written = this.armed && key.includes('/turn/') ? await super.get(key) : null;
    if (written && !new TextDecoder().decode(written.body).includes('"lease_expires_at"')) this.landed = true;
    return stored;
  }
  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (this.landed && key.endsWith('/session.json')) throw new StorageError('injected: config read failed');
    return super.get(key, options);
  }
}

/** The app on `store` for a describe block: its base URL and a client without retries, once started. */
function onTailgate(store: MemoryStore) {
  const world = { baseURL: '', client: undefined as unknown as OpenAI };
  let close: () => Promise<void> = async () => {};
  beforeAll(async () => {
    const started = await startTailgate({}, store);
    close = started.close;
    world.baseURL = started.baseURL;
    world.client = new OpenAI({ apiKey: TOKEN, baseURL: started.baseURL, maxRetries: 0 });
  });
  afterAll(() => close());
  return world;
}

describe('a storage failure after a compaction landed', () => {
  const store = new AfterCompactFaults();
  const tailgate = onTailgate(store);

  it('POST /v1/sessions/:id/compact answers the compaction', async () => {
    const first = await tailgate.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    store.armed = true;
    const compacted = await tailgatePost(tailgate.baseURL, `/sessions/${sessionId}/compact`, { keep_tokens: 0 });
    store.armed = false;
    const landed = store.landed;
    store.landed = false;
    expect(landed).toBe(true);
    expect(compacted.status).toBe(200);
    expect(await compacted.json()).toMatchObject({ compacted: true, context: { start_seq: 3 } });
    // The compaction stands: the session's context starts at its summary.
    expect((await tailgateGet(tailgate.baseURL, `/sessions/${sessionId}/prompt?full=true`)).items[0]).toMatchObject({
      synthetic: 'summary',
    });
  });

  it('responses.compact answers its compaction item', async () => {
    const first = await tailgate.client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    store.armed = true;
    const compacted = await tailgate.client.responses.compact({ model: 'echo', previous_response_id: first.id }).then(
      (response) => response,
      (error: unknown) => error,
    );
    store.armed = false;
    const landed = store.landed;
    store.landed = false;
    expect(landed).toBe(true);
    expect(compacted).toMatchObject({ output: [{ type: 'compaction', id: `cmp_${sessionId}_3` }] });
  });
});

/** Fails every write of the history index (lib/openai/history-index.ts) while armed. */
class HistoryIndexFaults extends MemoryStore {
  armed = false;
  failed = 0;
  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    if (!this.armed || !key.includes('openai/history/')) return super.put(key, body, options);
    this.failed++;
    throw new StorageError('injected: index write failed');
  }
}

describe("a storage failure writing a background turn's compaction index", () => {
  const store = new HistoryIndexFaults();
  const tailgate = onTailgate(store);

  it('leaves the response completed, its stream ended, and the next resend a new conversation', async () => {
    store.armed = true;
    // Its stream ends with response.completed, the compaction item last.
    const { sessionId, id, compaction } = await compactedInBackground(tailgate.client);
    store.armed = false;
    expect(store.failed).toBeGreaterThan(0);
    expect(await tailgate.client.responses.retrieve(id)).toMatchObject({ status: 'completed' });
    const input: OpenAI.Responses.ResponseInputItem[] = [compaction, { role: 'user', content: 'go on' }];
    const next = await tailgate.client.responses.create({ model: 'echo', input });
    expect(next.conversation!.id).not.toBe(sessionId);
  });
});
