import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Deleting the newest response with the official `openai` client through the real app and its
 * bucket: the conversation goes back to the response before it and goes on from there. Runs in
 * Node (test/http/http.test.ts) and inside workerd with R2 (test/workers/http-turns.test.ts).
 */
/** A new conversation's first two responses ('first question', 'second question'). */
export async function twoResponses(client: OpenAI) {
  const first = await client.responses.create({ model: 'echo', input: 'first question' });
  const second = await client.responses.create({
    model: 'echo',
    previous_response_id: first.id,
    input: 'second question',
  });
  return { first, second };
}

export function defineResponseDeleteSuite(label: string, harness: HttpHarness): void {
  const client = new OpenAI({
    apiKey: TOKEN,
    baseURL: 'https://tailgate.test/v1',
    maxRetries: 0,
    fetch: (url: string | URL | Request, init?: RequestInit) => {
      const target = new URL(url instanceof Request ? url.url : url);
      return harness.fetch(`${target.pathname}${target.search}`, init);
    },
  });
  const texts = async (conversation: string) =>
    (await client.conversations.items.list(conversation, { order: 'asc' })).data.map((item) =>
      item.type === 'message' ? item.content.map((part) => ('text' in part ? part.text : '')).join('') : item.type,
    );

  describe(`${label}: deleting responses with the openai client`, () => {
    it('takes the newest response out, refuses an older one and an item, and the conversation goes on', async () => {
      const { first, second } = await twoResponses(client);
      const conversation = first.conversation!.id;
      await expect(client.responses.delete(first.id)).rejects.toMatchObject({ status: 409, code: 'delete_refused' });
      const [item] = (await client.conversations.items.list(conversation, { order: 'asc' })).data;
      await expect(
        client.conversations.items.delete(item!.id!, { conversation_id: conversation }),
      ).rejects.toMatchObject({ status: 400, code: 'unsupported' });

      await client.responses.delete(second.id);
      await expect(client.responses.retrieve(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(client.responses.delete(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      expect(await texts(conversation)).toEqual(['first question', 'echo: first question']);
      const third = await client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input: 'third question',
      });
      expect(third.conversation!.id).toBe(conversation);
      // The deleted response's id is not the new one's: a late retry and a read find nothing.
      expect(third.id).not.toBe(second.id);
      await expect(client.responses.delete(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      await expect(client.responses.retrieve(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
      expect(await client.responses.retrieve(third.id)).toMatchObject({ id: third.id, status: 'completed' });
      expect(await texts(conversation)).toEqual([
        'first question',
        'echo: first question',
        'third question',
        'echo: third question',
      ]);
      await client.responses.delete(third.id);
      await client.responses.delete(first.id);
      expect(await texts(conversation)).toEqual([]);
      expect(await client.conversations.retrieve(conversation)).toMatchObject({ id: conversation });
    });

    it('refuses to take out a response that delivered inbox notices: a notice is delivered once', async () => {
      const first = await client.responses.create({ model: 'echo', input: 'first question' });
      const conversation = first.conversation!.id;
      const posted = await harness.fetch(`/v1/sessions/${conversation}/inbox`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ content: 'the build is green' }),
      });
      expect(posted.status).toBe(201);
      const second = await client.responses.create({ model: 'echo', previous_response_id: first.id, input: 'next' });
      await expect(client.responses.delete(second.id)).rejects.toMatchObject({ status: 409, code: 'delete_refused' });
      expect(await client.responses.retrieve(second.id)).toMatchObject({ id: second.id, status: 'completed' });
    });
  });
}
