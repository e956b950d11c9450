import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { createApp, createTurnRunner, type AppOptions } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { clientInProcess } from './server.ts';

// A background response's Idempotency-Key sent again without `background` (a client that lost
// the create's answer and retries it as a plain request, streamed or not): the key replays the
// response, as it stands once its turn ended, never the `queued` object the create answered,
// as the native route replays a background turn's answer to its key sent without `background`.
const TOKEN = 'key-retry-token';
const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

async function completedInBackground() {
  const sent: BackgroundTurn[] = [];
  const store = new MemoryStore();
  const options: AppOptions = {
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    queueTurn: () => async (run) => void sent.push(run),
  };
  const app = createApp(options);
  const client = clientInProcess(app, TOKEN);
  const key = { headers: { 'Idempotency-Key': 'bg-key-1' } };
  const created = await client.responses.create({ model: 'echo', input: 'hello', background: true }, key);
  expect(created.status).toBe('queued');
  const background: Promise<unknown>[] = [];
  expect(await createTurnRunner(options)(sent.shift()!, environment, (task) => void background.push(task))).toBe(
    'done',
  );
  await Promise.all(background);
  expect((await client.responses.retrieve(created.id)).status).toBe('completed');
  return { client, created, key };
}

describe("a background response's key sent again without background", () => {
  it('answers the response completed, with its output', async () => {
    const { client, created, key } = await completedInBackground();
    const again = await client.responses.create({ model: 'echo', input: 'hello' }, key);
    expect(again.id).toBe(created.id);
    expect(again.status).toBe('completed');
    expect(again.output_text).toBe('echo: hello');
  });

  it('streamed, ends with response.completed holding the output', async () => {
    const { client, created, key } = await completedInBackground();
    const events: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: 'echo', input: 'hello', stream: true }, key))
      events.push(event);
    const last = events.at(-1)!;
    expect(last.type).toBe('response.completed');
    if (last.type !== 'response.completed') return;
    expect(last.response.id).toBe(created.id);
    expect(last.response.status).toBe('completed');
    expect(last.response.output_text).toBe('echo: hello');
  });
});

describe("a background response's key sent again without background, once the response was cancelled", () => {
  it("is refused with its error, as a failed foreground response's retry is, not answered as a retrieve", async () => {
    const store = new MemoryStore();
    const options: AppOptions = {
      store: () => store,
      readEnvironment: () => environment,
      log: () => {},
      // The queue never delivers it: it is cancelled while queued.
      queueTurn: () => async () => {},
    };
    const client = clientInProcess(createApp(options), TOKEN);
    const key = { headers: { 'Idempotency-Key': 'bg-key-cancelled' }, maxRetries: 0 };
    const created = await client.responses.create({ model: 'echo', input: 'hello', background: true }, key);
    await client.responses.cancel(created.id);
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved.status).toBe('cancelled');
    const again = await client.responses
      .create({ model: 'echo', input: 'hello' }, key)
      .catch((error: unknown) => error);
    expect(again).toBeInstanceOf(OpenAI.ConflictError);
    expect(again).toMatchObject({ code: 'turn_cancelled', error: { message: retrieved.error?.message } });
    expect((again as InstanceType<typeof OpenAI.ConflictError>).headers.get('x-should-retry')).toBe('false');
  });
});
