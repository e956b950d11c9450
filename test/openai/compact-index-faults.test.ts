import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import type { Body, GetOptions, ObjectInfo, PutOptions, StoredObject } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { startTailgate, tailgateGet, tailgatePost, TOKEN } from './server.ts';

// A compaction's index entry is written after the compaction landed (lib/openai/compact-response.ts):
// a storage failure while writing it leaves the client's next step a new conversation, but never
// turns the compaction, which happened and was charged, into an error answer.

/** Once armed, fails every session config read after a compaction's record landed. */
class AfterCompactFaults extends MemoryStore {
  armed = false;
  landed = false;
  override async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    const stored = await super.put(key, body, options);
    if (this.armed && key.includes('/turn/')) this.landed = true;
    return stored;
  }
  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (this.landed && key.endsWith('/session.json')) throw new StorageError('injected: config read failed');
    return super.get(key, options);
  }
}

describe('a storage failure after a compaction landed', () => {
  const store = new AfterCompactFaults();
  let tailgate: Awaited<ReturnType<typeof startTailgate>>;
  let client: OpenAI;
  beforeAll(async () => {
    tailgate = await startTailgate({}, store);
    client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
  });
  afterAll(() => tailgate.close());

  it('POST /v1/sessions/:id/compact answers the compaction', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'call me Ishmael' });
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
    const first = await client.responses.create({ model: 'echo', input: 'call me Ishmael' });
    const sessionId = first.conversation!.id;
    store.armed = true;
    const compacted = await client.responses.compact({ model: 'echo', previous_response_id: first.id }).then(
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
