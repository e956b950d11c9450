import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { startTailgate, TOKEN } from './server.ts';

// A response whose turn still runs (its lease held: a background one, or one streaming) has no
// next turn yet: `store: false` naming it is the 409 turn_in_progress a stored create naming it
// gets, as is a count of that prompt, never a prompt of its input without its output.
let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
/** The gate of the provider's next answer, and a signal that it was asked. */
let held: { gate: Promise<void>; asked: () => void } | undefined;

beforeAll(async () => {
  provider = await startFakeProvider(() => {
    const reply = { text: fixture('openai-chat-text.json') };
    const hold = held;
    held = undefined;
    if (!hold) return reply;
    hold.asked();
    return { ...reply, gate: hold.gate };
  });
  tailgate = await startTailgate({
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_ALIASES: 'held=openai-compatible:fake',
    MODEL_MAX_RETRIES: '0',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  await tailgate.close();
  await provider.close();
});

const answer = (error: unknown) => {
  const { status, code } = error as InstanceType<typeof OpenAI.APIError>;
  return { status, code };
};

describe('store: false naming a response whose turn still runs', () => {
  it('is the 409 turn_in_progress of the stored create, and so is its count', async () => {
    const first = await client.responses.create({ model: 'held', input: 'one' });
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    const asked = new Promise<void>((resolve) => (held = { gate, asked: resolve }));
    const running = await client.responses.create({
      model: 'held',
      previous_response_id: first.id,
      input: 'two',
      background: true,
    });
    await asked;
    try {
      const body = { model: 'held', previous_response_id: running.id, input: 'aside' };
      const side = await client.responses.create({ ...body, store: false }).catch((error: unknown) => error);
      const count = await client.responses.inputTokens.count(body).catch((error: unknown) => error);
      const storedCreate = await client.responses.create(body).catch((error: unknown) => error);
      expect(answer(storedCreate)).toEqual({ status: 409, code: 'turn_in_progress' });
      expect(answer(count)).toEqual(answer(storedCreate));
      expect(answer(side)).toEqual(answer(storedCreate));
    } finally {
      release();
    }
  });
});
