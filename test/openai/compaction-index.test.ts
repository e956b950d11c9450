import OpenAI from 'openai';
import type { ResponseCompactionItem } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

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
    const client = new OpenAI({
      apiKey: TOKEN,
      baseURL: 'http://tailgate.test/v1',
      maxRetries: 0,
      fetch: async (url: string | URL | Request, init?: RequestInit) => app.request(String(url), init),
    });
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
