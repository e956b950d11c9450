import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { StorageError } from '../../lib/errors.ts';
import type { GetOptions, StoredObject } from '../../lib/store/object-store.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { twoResponses } from '../http/response-delete-suite.ts';
import { startTailgate, TOKEN } from './server.ts';

// A response taken after a delete of the newest one reads the session's config for its id
// (lib/openai/create-response.ts): a storage failure at each config read of that create, in
// turn, with the official client against the real app. An answered response is there under
// its own id, a failed create is a 503, the deleted id stays 404, and the conversation goes on.

/** Fails the `failAt`-th get of a `session.json` while armed. */
class ConfigFaults extends MemoryStore {
  failAt = 0;
  reads = 0;
  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (this.failAt > 0 && key.endsWith('/session.json') && ++this.reads === this.failAt)
      throw new StorageError('injected: config read failed');
    return super.get(key, options);
  }
}

async function created(client: OpenAI, body: OpenAI.Responses.ResponseCreateParamsNonStreaming, stream: boolean) {
  if (!stream) return client.responses.create(body);
  let last: OpenAI.Responses.Response | undefined;
  for await (const event of await client.responses.create({ ...body, stream: true })) {
    if (event.type === 'response.completed') last = event.response;
    if (event.type === 'response.failed') throw new Error('response.failed');
  }
  if (!last) throw new Error('the stream ended without its response');
  return last;
}

describe('a storage failure at each config read of a response taken after a delete', () => {
  for (const stream of [false, true])
    it(`stream: ${stream}`, async () => {
      const store = new ConfigFaults();
      const tailgate = await startTailgate({}, store);
      const client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
      let failures = 0;
      try {
        for (let failAt = 1; ; failAt++) {
          const { first, second } = await twoResponses(client);
          const conversation = first.conversation!.id;
          await client.responses.delete(second.id);
          store.reads = 0;
          store.failAt = failAt;
          const body = { model: 'echo', previous_response_id: first.id, input: 'third question' };
          const third = await created(client, body, stream).then(
            (response) => response,
            (error: unknown) => error,
          );
          const hit = store.reads >= failAt;
          store.failAt = 0;
          if (third instanceof Error) {
            failures += 1;
            expect(third, `failing config read ${failAt}`).toMatchObject({ status: 503 });
          } else {
            const answered = third as OpenAI.Responses.Response;
            expect(answered.id).not.toBe(second.id);
            expect(await client.responses.retrieve(answered.id)).toMatchObject({ id: answered.id });
          }
          await expect(client.responses.retrieve(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
          await expect(client.responses.delete(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
          const next = await client.responses.create({ model: 'echo', conversation, input: 'and on' });
          expect(await client.responses.retrieve(next.id)).toMatchObject({ id: next.id, status: 'completed' });
          if (!hit) break;
        }
        // The failures reached the create's own reads, not only reads around it.
        expect(failures).toBeGreaterThan(0);
      } finally {
        await tailgate.close();
      }
    });
});
