import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';

// Telling a retry of an aborted response from a new request (lib/openai/aborted-retry.ts) reads
// the aborted turn only when the newest turn is one: a conversation's next response reads no
// turn more than it did before that check existed. So for a branch under previous_response_id,
// and a resend of the items since it (lib/openai/resent-after.ts) reads only what tells it.
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
  const measured = async (body: unknown) => {
    await Promise.all(background.splice(0));
    store.reset();
    const result = await respond(body);
    const { get, list } = store.counts;
    await Promise.all(background.splice(0));
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    return { get, list };
  };
  return { respond, measured };
}

describe('a conversation response after a completed turn', () => {
  it('costs the gets and listings it did before aborted retries were recognised', async () => {
    const { respond, measured } = setup();
    const first = await respond({ model: 'echo', input: 'first' });
    const conversation = first.body.conversation.id as string;
    await measured({ model: 'echo', input: 'second', conversation });
    // The same state each time: one completed turn more, nothing aborted.
    for (const input of ['third', 'fourth'])
      expect(await measured({ model: 'echo', input, conversation })).toEqual({ get: 10, list: 4 });
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
    expect(costs).toEqual([
      { get: 45, list: 15 },
      { get: 45, list: 15 },
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
    // 2 of them the config and the kept object of the newest response (a step of the same loop's).
    expect(await measured({ ...step, input: [...resent, { role: 'user', content: 'third' }] })).toEqual({
      get: 39,
      list: 12,
    });
  });
});
