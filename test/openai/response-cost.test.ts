import OpenAI from 'openai';
import type { Response } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fixture,
  startFakeProvider,
  type FakeProvider,
  type RecordedRequest,
} from '../support/fake-providers/fake-provider-server.ts';
import { settledResponse, startTailgate, tailgateGet, TOKEN } from './server.ts';

// What each step cost, read off the `tailgate` extension of a response through the official
// `openai` client: the same USD as the turn's native receipt (`usage.cost_usd`), in the created,
// streamed, retrieved and background response alike, and null for a model without a known price.
let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;

function chatReply(request: RecordedRequest) {
  return request.body?.stream
    ? { sse: fixture('openai-chat-text.sse') }
    : { json: JSON.parse(fixture('openai-chat-text.json')) };
}

beforeAll(async () => {
  provider = await startFakeProvider(chatReply);
  tailgate = await startTailgate({
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_ALIASES: 'unpriced=openai-compatible:fake',
    MODEL_MAX_RETRIES: '0',
    // One USD per input token and two per output token: every step costs something.
    MODEL_PRICES: JSON.stringify({ echo: { input: 1_000_000, output: 2_000_000 } }),
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  await tailgate.close();
  await provider.close();
});

type Extended = Response & { tailgate: { session_id: string; turn: number; cost_usd: number | null } };

/** The native receipt's cost of the turn a response ran. */
async function receiptCost(response: Response): Promise<number | null> {
  const { session_id, turn } = (response as Extended).tailgate;
  const receipt = await tailgateGet(tailgate.baseURL, `/sessions/${session_id}/turns/${turn}`);
  return receipt.usage.cost_usd;
}

describe("a response's tailgate.cost_usd", () => {
  it('is the step cost of its receipt, on create and retrieve, step by step', async () => {
    const first = await client.responses.create({ model: 'echo', input: 'what does this cost?' });
    const second = await client.responses.create({
      model: 'echo',
      input: 'and this longer step, what does it cost?',
      previous_response_id: first.id,
    });
    for (const response of [first, second]) {
      const cost = (response as Extended).tailgate.cost_usd;
      const { input_tokens, output_tokens } = response.usage!;
      expect(cost).toBe(input_tokens + 2 * output_tokens);
      expect(cost).toBe(await receiptCost(response));
      expect((await client.responses.retrieve(response.id)) as Extended).toMatchObject({
        tailgate: { cost_usd: cost },
      });
    }
  });

  it("is in a stream's response.completed", async () => {
    const stream = await client.responses.create({ model: 'echo', input: 'streamed', stream: true });
    let completed: Response | undefined;
    for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
    const cost = (completed as Extended).tailgate.cost_usd;
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBe(await receiptCost(completed!));
  });

  it('is in a background response once it ended, retrieved or streamed', async () => {
    const created = await client.responses.create({ model: 'echo', input: 'later', background: true });
    // Not yet: a response still running has no cost.
    expect((created as Partial<Extended>).tailgate?.cost_usd).toBeUndefined();
    const ended = await settledResponse(client, created.id);
    const cost = (ended as Extended).tailgate.cost_usd;
    expect(cost).toBeGreaterThan(0);
    expect(cost).toBe(await receiptCost(ended));
    let completed: Response | undefined;
    for await (const event of await client.responses.retrieve(created.id, { stream: true }))
      if (event.type === 'response.completed') completed = event.response;
    expect((completed as Extended).tailgate.cost_usd).toBe(cost);
  });

  it('is the same in a keyed retry replayed, and in a streamed response retrieved', async () => {
    const headers = { 'Idempotency-Key': `cost-${crypto.randomUUID()}` };
    const first = (await client.responses.create({ model: 'echo', input: 'once' }, { headers })) as Extended;
    const again = (await client.responses.create({ model: 'echo', input: 'once' }, { headers })) as Extended;
    expect(again.id).toBe(first.id);
    expect(again.tailgate.cost_usd).toBe(first.tailgate.cost_usd);
    expect(first.tailgate.cost_usd).toBeGreaterThan(0);
    const stream = await client.responses.create({ model: 'echo', input: 'streamed', stream: true });
    let completed: Response | undefined;
    for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
    const retrieved = (await client.responses.retrieve(completed!.id)) as Extended;
    expect((completed as Extended).tailgate).toEqual(retrieved.tailgate);
  });

  it('is null for a model without a known price, as its receipt says', async () => {
    const response = await client.responses.create({ model: 'unpriced', input: 'hello' });
    expect(response.status).toBe('completed');
    expect((response as Extended).tailgate).toHaveProperty('cost_usd', null);
    expect(await receiptCost(response)).toBeNull();
    const retrieved = (await client.responses.retrieve(response.id)) as Extended;
    expect(retrieved.tailgate).toHaveProperty('cost_usd', null);
  });
});
