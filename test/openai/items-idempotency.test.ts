import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet, TOKEN } from './server.ts';

// `conversations.items.create` under an Idempotency-Key, retried by the official client
// (default retries) after its first answer was lost: the items are stored once.
const world = clientOnTailgate();

/**
 * The official client (its default 2 retries) whose first POST to a conversation's items reaches
 * the app and is answered, its answer then lost as a dropped connection is: the client retries.
 */
function losingFirstAppend(): { client: OpenAI; sent: string[] } {
  const sent: string[] = [];
  let lost = false;
  const client = new OpenAI({
    apiKey: TOKEN,
    baseURL: world.tailgate.baseURL,
    fetch: async (url: string | URL | Request, init?: RequestInit) => {
      const response = await fetch(url, init);
      const headers = new Headers(init?.headers);
      if (init?.method === 'POST' && String(url).endsWith('/items')) {
        sent.push(headers.get('idempotency-key') ?? '');
        if (!lost) {
          lost = true;
          // The app answered (its body read, nothing left held): the answer goes no further.
          await response.arrayBuffer();
          throw new TypeError('fetch failed: the connection was reset');
        }
      }
      return response;
    },
  });
  return { client, sent };
}

async function itemCount(id: string): Promise<number> {
  return (await tailgateGet(world.tailgate.baseURL, `/sessions/${id}`)).counts.items;
}

describe('the official openai client: conversations.items.create under an Idempotency-Key', () => {
  it('a retry after a lost answer replays the first one: the items are stored once', async () => {
    const { id } = await world.client.conversations.create({
      items: [{ type: 'message', role: 'user', content: 'hello' }],
    });
    const { client, sent } = losingFirstAppend();
    const body = {
      items: [
        { type: 'function_call' as const, call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Oslo"}' },
        { type: 'function_call_output' as const, call_id: 'call_1', output: '-2C' },
      ],
    };
    const added = await client.conversations.items.create(id, body, { headers: { 'Idempotency-Key': 'append-1' } });
    expect(sent).toEqual(['append-1', 'append-1']);
    expect(added.data.map((item) => item.id)).toEqual([`fc_${id}_2`, `fco_${id}_3`]);
    expect(await itemCount(id)).toBe(3);
    // Sent again later under its key: the same answer, nothing stored.
    const again = await world.client.conversations.items.create(id, body, {
      headers: { 'Idempotency-Key': 'append-1' },
    });
    expect(again).toEqual(added);
    expect(await itemCount(id)).toBe(3);
    // Another body under the key: 422, nothing stored.
    const reused = await world.client.conversations.items
      .create(
        id,
        { items: [{ type: 'message', role: 'user', content: 'other' }] },
        {
          headers: { 'Idempotency-Key': 'append-1' },
        },
      )
      .catch((error: unknown) => error);
    expect(reused).toBeInstanceOf(OpenAI.UnprocessableEntityError);
    expect(reused).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    expect(await itemCount(id)).toBe(3);
    // The key is the conversation's: a turn sent under it is refused as another request.
    const turn = await world.client.responses
      .create({ conversation: id, input: 'hi' }, { headers: { 'Idempotency-Key': 'append-1' } })
      .catch((error: unknown) => error);
    expect(turn).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
  });

  it('without a key, the client sends none (openai 7.59): a retry after a lost answer appends again', async () => {
    const { id } = await world.client.conversations.create();
    const { client, sent } = losingFirstAppend();
    await client.conversations.items.create(id, { items: [{ type: 'message', role: 'user', content: 'twice' }] });
    expect(sent).toEqual(['', '']);
    expect(await itemCount(id)).toBe(2);
  });
});
