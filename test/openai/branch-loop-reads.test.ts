import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { GetOptions, StoredObject } from '../../lib/store/object-store.ts';
import { echoedThen, startTailgate, tailgatePost, TOKEN } from './server.ts';

// A step of a loop under an older response looks for its branch among the forks its own scope
// made at that response (lib/openai/resent-after.ts branchResentAfter), not among every fork.

/** Counts the gets of session configs (one per fork a listing of forks reads). */
class CountedStore extends MemoryStore {
  configGets = 0;
  override async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    if (key.endsWith('/session.json')) this.configGets++;
    return super.get(key, options);
  }
}

const store = new CountedStore();
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
beforeAll(async () => {
  tailgate = await startTailgate({}, store);
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(() => tailgate.close());

const sessionOf = (responseId: string) => /^resp_(conv_[0-9a-f]{24})_/.exec(responseId)![1]!;

describe('a loop step under an older response of a session with many forks', () => {
  it('reads the forks its own loop made there, not every fork of the session', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'template' });
    const conversation = sessionOf(first.id);
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'moved on' });
    // Many conversations forked off the same response (others' branches, native forks).
    for (let index = 0; index < 60; index++) {
      const forked = await tailgatePost(tailgate.baseURL, `/sessions/${conversation}/fork`, { at_turn: 1 });
      expect(forked.status).toBe(201);
    }
    const mine = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'hi' });
    const before = store.configGets;
    const next = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: echoedThen('hi', 'and then'),
    });
    expect(sessionOf(next.id)).toBe(sessionOf(mine.id));
    // Fewer reads of session configs than the session has forks: the others are not listed.
    expect(store.configGets - before).toBeLessThan(60);
  });

  it('a loop goes on in its branch whatever number of other loops of its scope branched there before', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'base' });
    await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'moved on' });
    // More conversations branched off that response under the same scope than a step looks among.
    for (let index = 0; index < 25; index++)
      await client.responses.create({ model: 'echo', previous_response_id: first.id, input: `chat ${index}` });
    const mine = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'hi' });
    const next = await client.responses.create({
      model: 'echo',
      previous_response_id: first.id,
      input: echoedThen('hi', 'and then'),
    });
    expect(sessionOf(next.id)).toBe(sessionOf(mine.id));
  });
});
