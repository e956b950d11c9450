import OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeProvider, type FakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { startTailgate, TOKEN } from './server.ts';

// A conversation deleted while one of its responses streams from the journal (a background
// response's create stream, or a reader resuming one): the stream ends as the foreground one
// does, with response.failed naming the deletion (not_found), never cut short without a
// terminal event (which the `openai` client reads as a normal end).
let provider: FakeProvider;
let tailgate: Awaited<ReturnType<typeof startTailgate>>;
let client: OpenAI;
let release = () => {};
const released = new Promise<void>((resolve) => (release = resolve));
let requested = () => {};

function chunk(delta: object): string {
  const choices = [{ index: 0, delta, finish_reason: null }];
  return `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices })}\n\n`;
}

beforeAll(async () => {
  provider = await startFakeProvider(() => {
    requested();
    // Two words, then the model holds until the test ends (the delete aborts the call first).
    const sse = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + chunk({ content: 'two ' });
    return { sse, pause: { after: 2, until: released }, hang: true };
  });
  tailgate = await startTailgate({
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    MODEL_ALIASES: 'slow=openai-compatible:fake',
    MODEL_MAX_RETRIES: '0',
  });
  client = new OpenAI({ apiKey: TOKEN, baseURL: tailgate.baseURL, maxRetries: 0 });
});
afterAll(async () => {
  release();
  await tailgate.close();
  await provider.close();
});

/** Reads `stream` to its end into `events`; `delta` is called at its first output_text.delta. */
async function readAll(stream: AsyncIterable<ResponseStreamEvent>, events: ResponseStreamEvent[], delta: () => void) {
  for await (const event of stream) {
    events.push(event);
    if (event.type === 'response.output_text.delta') delta();
  }
}

/** A promise and the function that resolves it. */
function signal(): [Promise<void>, () => void] {
  let resolve = () => {};
  const promise = new Promise<void>((done) => (resolve = done));
  return [promise, resolve];
}

describe('a conversation deleted while a response streams from its journal', () => {
  it('ends the create stream and a resumed stream with response.failed (not_found)', async () => {
    const [called, calledNow] = signal();
    requested = calledNow;
    const stream = await client.responses.create({ model: 'slow', input: 'go', background: true, stream: true });
    const created: ResponseStreamEvent[] = [];
    const [createdDelta, createdDeltaNow] = signal();
    const createdRead = readAll(stream, created, createdDeltaNow);
    await called;
    await createdDelta;
    const id = created[0]!.type === 'response.created' ? created[0]!.response.id : '';
    // A second reader resumes the same response while it runs.
    const resumed: ResponseStreamEvent[] = [];
    const [resumedDelta, resumedDeltaNow] = signal();
    const resumedRead = readAll(await client.responses.retrieve(id, { stream: true }), resumed, resumedDeltaNow);
    await resumedDelta;
    const conversation = (await client.responses.retrieve(id)).conversation!.id;
    await client.conversations.delete(conversation);
    await Promise.all([createdRead, resumedRead]);
    for (const events of [created, resumed])
      expect(events.at(-1)).toMatchObject({
        type: 'response.failed',
        response: { id, status: 'failed', error: { code: 'not_found' } },
      });
  });

  it('ends a resumed foreground stream with response.failed (not_found), as the live one ends', async () => {
    const [called, calledNow] = signal();
    requested = calledNow;
    const stream = await client.responses.create({ model: 'slow', input: 'go', stream: true });
    const live: ResponseStreamEvent[] = [];
    const [liveDelta, liveDeltaNow] = signal();
    const liveRead = readAll(stream, live, liveDeltaNow);
    await called;
    await liveDelta;
    const id = live[0]!.type === 'response.created' ? live[0]!.response.id : '';
    const resumed: ResponseStreamEvent[] = [];
    const [resumedDelta, resumedDeltaNow] = signal();
    const resumedRead = readAll(await client.responses.retrieve(id, { stream: true }), resumed, resumedDeltaNow);
    await resumedDelta;
    const conversation = (live[0] as { response: { conversation: { id: string } } }).response.conversation.id;
    await client.conversations.delete(conversation);
    await Promise.all([liveRead, resumedRead]);
    for (const events of [live, resumed])
      expect(events.at(-1)).toMatchObject({
        type: 'response.failed',
        response: { id, status: 'failed', error: { code: 'not_found' } },
      });
  });
});
