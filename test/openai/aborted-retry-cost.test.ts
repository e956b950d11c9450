import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';

// Telling a retry of an aborted response from a new request (lib/openai/aborted-retry.ts) reads
// the aborted turn only when the newest turn is one: a conversation's next response reads no
// turn more than it did before that check existed. So for a branch under previous_response_id,
// and a resend of the items since it (lib/openai/resent-after.ts) reads only what tells it. A
// loop's step under `conversation` resending what it sent before (lib/openai/conversation-resend.ts)
// reads the kept object of the response it sent it to; nothing when the session's head says it is none.
const TOKEN = 'cost-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

function setup() {
  const store = new CountingStore(new MemoryStore());
  const app = createApp({ store: () => store, readEnvironment: (c) => c.env ?? {}, log: () => {} });
  // Work after the response (packing) is awaited before and after each measurement.
  const background: Promise<unknown>[] = [];
  const executionContext = {
    waitUntil: (task: Promise<unknown>) => void background.push(task),
    passThroughOnException: () => {},
    props: {},
  };
  const respond = async (body: unknown) => {
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const init = { method: 'POST', headers, body: JSON.stringify(body) };
    const response = await app.request('/v1/responses', init, environment, executionContext);
    return { status: response.status, body: (await response.json()) as any };
  };
  /** The texts of a conversation's messages, oldest first. */
  const messages = async (conversation: string) => {
    const init = { headers: { authorization: `Bearer ${TOKEN}` } };
    const path = `/v1/conversations/${conversation}/items?order=asc`;
    const response = await app.request(path, init, environment, executionContext);
    const { data } = (await response.json()) as { data: { type: string; content: { text: string }[] }[] };
    return data.flatMap((item) => (item.type === 'message' ? [item.content[0]!.text] : []));
  };
  const measured = async (body: unknown) => {
    await Promise.all(background.splice(0));
    store.reset();
    const result = await respond(body);
    const { get, list } = store.counts;
    await Promise.all(background.splice(0));
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    return { get, list };
  };
  return { respond, measured, messages };
}

describe('a conversation response after a completed turn', () => {
  it('costs the gets and listings it did before aborted retries were recognised', async () => {
    const { respond, measured } = setup();
    const first = await respond({ model: 'echo', input: 'first' });
    const conversation = first.body.conversation.id as string;
    await measured({ model: 'echo', input: 'second', conversation });
    // The same state each time: one completed turn more, nothing aborted. The records listed are
    // this process's, taken from the record cache (lib/session/log/record-cache.ts), not got.
    for (const input of ['third', 'fourth'])
      expect(await measured({ model: 'echo', input, conversation })).toEqual({ get: 7, list: 4 });
  });
});

describe('a conversation request of several items', () => {
  const tools = [{ type: 'function', name: 'lookup', parameters: { type: 'object' } }];
  const message = (content: string) => ({ role: 'user', content });

  it("resending its loop's items reads the kept object of the response they went to, nothing more", async () => {
    const { respond, measured, messages } = setup();
    const conversation = (await respond({ model: 'echo', input: 'first' })).body.conversation.id as string;
    await respond({ model: 'echo', input: [message('a'), message('b')], conversation });
    const single = await measured({ model: 'echo', input: 'c', conversation });
    // The newest response was sent [c]: this request resends it (lib/openai/conversation-resend.ts).
    const resent = await measured({ model: 'echo', input: [message('c'), message('d')], conversation });
    expect(resent).toEqual({ get: single.get + 1, list: single.list });
    expect((await messages(conversation)).slice(-4)).toEqual(['c', 'echo: c', 'd', 'echo: d']);
  });

  it('after calls, answering none of them past its first item, reads what a single item does', async () => {
    const { respond, measured } = setup();
    const conversation = (await respond({ model: 'echo', input: 'first' })).body.conversation.id as string;
    const called = async (args: string) => {
      const response = await respond({ model: 'echo', input: `call lookup ${args}`, conversation, tools });
      const call = response.body.output.find((item: { type: string }) => item.type === 'function_call');
      return { type: 'function_call_output', call_id: call.call_id, output: 'found' };
    };
    const single = await measured({ model: 'echo', input: [await called('{"n":1}')], conversation, tools });
    const answered = [await called('{"n":2}'), message('and more')];
    expect(await measured({ model: 'echo', input: answered, conversation, tools })).toEqual(single);
  });
});

describe('a branch under previous_response_id', () => {
  it('with a single item, which resends nothing, reads no more than telling an aborted retry apart needs', async () => {
    const { respond, measured } = setup();
    const first = await respond({ model: 'echo', input: 'first' });
    await respond({ model: 'echo', input: 'second', previous_response_id: first.body.id });
    const costs = [];
    for (const input of ['branch one', 'branch two'])
      costs.push(await measured({ model: 'echo', input, previous_response_id: first.body.id }));
    // What it read before resends were recognised (lib/openai/resent-after.ts): an input of one item resends none.
    // 2 more: the config and the kept object of the response branched from, whose instructions the branch takes.
    // The records listed are this process's, taken from the record cache (log/record-cache.ts), not got.
    expect(costs).toEqual([
      { get: 31, list: 15 },
      { get: 31, list: 15 },
    ]);
  });

  it('resending the items since it, continuing the newest response (completed), reads no aborted turn', async () => {
    const { respond, measured } = setup();
    const first = await respond({ model: 'echo', input: 'first' });
    await respond({ model: 'echo', input: 'second', previous_response_id: first.body.id });
    const resent = [
      { role: 'user', content: 'second' },
      { role: 'assistant', content: 'echo: second' },
    ];
    const step = { model: 'echo', previous_response_id: first.body.id };
    // 2 of them the config and the kept object of the newest response (a step of the same loop's);
    // the records listed are this process's, from the record cache (log/record-cache.ts).
    expect(await measured({ ...step, input: [...resent, { role: 'user', content: 'third' }] })).toEqual({
      get: 27,
      list: 12,
    });
  });
});
