import { createHash } from 'node:crypto';
import { createOpenAI } from '@ai-sdk/openai';
import { APICallError, generateText } from 'ai';
import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { TOKEN } from './server.ts';
import { environment, noBodyHeldAfterEach, texts } from '../support/dead-process.ts';
import { goingOnFrom } from '../support/response-starts.ts';

// A foreground response whose turn is closed by someone else is answered 409 `turn_cancelled`,
// which the `openai` client retries unless told `x-should-retry: false`. An explicit cancel
// (`POST .../turns/{turn}/cancel`) says it: the cancelled input is not sent again. An `interrupt`
// does not: it takes the response out, and the client's retry stores its input once after it.

noBodyHeldAfterEach();
const heldEcho = releasedAfterEach();

/**
 * Two processes on one store, each with its own app, running a slowEcho model: `held` settles at
 * its first held call, and `stopped` once that call is aborted, released then (`release`).
 */
function twoProcesses() {
  const slow = heldEcho();
  const held = slow.reached;
  const stopped = held.then(
    (signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })),
  );
  const model = slow.model;
  const store = new MemoryStore();
  const processes = [0, 1].map(() => {
    const { options, drain } = heldOptions(model);
    const app = createApp({ store: () => store, readEnvironment: () => environment, ...options });
    // The official client with its default retries.
    const openai = new OpenAI({
      apiKey: TOKEN,
      baseURL: 'http://tailgate.test/v1',
      fetch: async (url: string | URL | Request, init?: RequestInit) => app.request(String(url), init),
    });
    // A native request: a POST of `body`, or a GET without one.
    const native = (path: string, body?: unknown) =>
      app.request(`http://tailgate.test${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    // The AI SDK's provider on the same app, every request keyed by its body when `keyed`.
    const aiSdk = (keyed: boolean) =>
      createOpenAI({
        apiKey: TOKEN,
        baseURL: 'http://tailgate.test/v1',
        fetch: async (url: string | URL | Request, init?: RequestInit) => {
          const key = createHash('sha256').update(String(init?.body)).digest('hex');
          const headers = {
            ...(init?.headers as Record<string, string>),
            ...(keyed ? { 'idempotency-key': key } : {}),
          };
          return app.request(String(url), { ...init, headers });
        },
      });
    return { openai, native, drain, aiSdk };
  });
  return {
    slow,
    held,
    processes,
    release: (when: Stop) => (when === 'aborted' ? stopped : Promise.resolve()).then(slow.release),
  };
}

// The turn's owner learns it was closed from its completion, refused (its model call answers
// first), or from its stop: at once in this process, at its lease's renewal in another.
type Stop = 'answered' | 'aborted';

for (const where of ['this process', 'another process'] as const)
  for (const when of ['answered', 'aborted'] as const) {
    it(`a response cancelled in ${where}, its call ${when}, is not retried: its input is stored once`, async () => {
      const { held, processes, release } = twoProcesses();
      const [owner, other] = processes as [(typeof processes)[0], (typeof processes)[0]];
      const closer = where === 'this process' ? owner : other;
      const { id } = await owner.openai.conversations.create({});
      await owner.openai.responses.create({ input: 'one', conversation: id });
      const sent = owner.openai.responses.create({ input: 'slow two', conversation: id }).catch((error) => error);
      await held;
      const cancel = await closer.native(`/v1/sessions/${id}/turns/2/cancel`, {});
      expect(cancel.status, await cancel.text()).toBe(200);
      // A retry, were it sent, would complete.
      await release(when);
      const answer = await sent;
      expect(answer).toBeInstanceOf(OpenAI.ConflictError);
      expect((answer as InstanceType<typeof OpenAI.ConflictError>).code).toBe('turn_cancelled');
      expect((answer as InstanceType<typeof OpenAI.ConflictError>).headers.get('x-should-retry')).toBe('false');
      await owner.drain();
      await other.drain();
      expect(await texts(owner.openai, id)).toEqual(['user: one', 'assistant: echo: one', 'user: slow two']);
    });

    it(`a response interrupted in ${where}, its call ${when}, is retried: its input stored once, after`, async () => {
      const { held, processes, release } = twoProcesses();
      const [owner, other] = processes as [(typeof processes)[0], (typeof processes)[0]];
      const closer = where === 'this process' ? owner : other;
      const { id } = await owner.openai.conversations.create({});
      await owner.openai.responses.create({ input: 'one', conversation: id });
      const sent = owner.openai.responses.create({ input: 'slow two', conversation: id });
      await held;
      const turn = await closer.native(`/v1/sessions/${id}/turns`, { input: 'native', on_busy: 'interrupt' });
      expect(turn.status, await turn.text()).toBe(200);
      await release(when);
      // The client retries the 409 `turn_cancelled` by itself.
      expect((await sent).status).toBe('completed');
      await owner.drain();
      await other.drain();
      expect(await texts(owner.openai, id)).toEqual([
        'user: one',
        'assistant: echo: one',
        'user: native',
        'assistant: echo: native',
        'user: slow two',
        'assistant: echo: slow two',
      ]);
    });
  }

// The AI SDK reads no `x-should-retry`: it retries every 409, a cancel's too (its `maxRetries`). Its
// retry is refused again, keyed (its key's stored refusal) or not (the cancelled turn's input).
for (const keyed of [false, true]) {
  it(`the AI SDK's generateText whose turn is cancelled is refused again${keyed ? ' under a key' : ''}`, async () => {
    const { held, processes, release, slow } = twoProcesses();
    const [owner] = processes as [(typeof processes)[0]];
    const { id } = await owner.openai.conversations.create({});
    await owner.openai.responses.create({ input: 'one', conversation: id });
    const model = owner.aiSdk(keyed)('echo');
    const options = { model, prompt: 'slow two', maxRetries: 1, providerOptions: { openai: { conversation: id } } };
    const sent = generateText(options).catch((error: unknown) => error);
    await held;
    const cancel = await owner.native(`/v1/sessions/${id}/turns/2/cancel`, {});
    expect(cancel.status, await cancel.text()).toBe(200);
    // Its retry, were it run, would complete.
    await release('aborted');
    const answer = await sent;
    await owner.drain();
    // The first answer and its retry's, each 409 `turn_cancelled`: one model call, the input stored once.
    const errors = (answer as { errors?: unknown[] }).errors ?? [];
    expect(errors).toHaveLength(2);
    for (const error of errors) {
      expect(APICallError.isInstance(error)).toBe(true);
      expect(error).toMatchObject({ statusCode: 409, responseBody: expect.stringContaining('"turn_cancelled"') });
    }
    expect(slow.signals).toHaveLength(1);
    expect(await texts(owner.openai, id)).toEqual(['user: one', 'assistant: echo: one', 'user: slow two']);
  });
}

// Sent again by hand (or by any client ignoring the header), without a key, from where the
// cancelled step began: refused again as the cancel's 409, nothing run, branched or started.
for (const start of ['previous_response_id', 'conversation', 'history'] as const)
  it(`a cancelled response's request sent again under ${start} is refused again; another input runs`, async () => {
    const { held, processes, release, slow } = twoProcesses();
    const [owner] = processes as [(typeof processes)[0]];
    const first = await owner.openai.responses.create({ input: 'one' });
    const id = first.conversation!.id;
    const request = goingOnFrom(first, start, 'one');
    const send = (input: string) =>
      owner.openai.responses.create(request(input), { maxRetries: 0 }).catch((error: unknown) => error);
    const sent = send('slow two');
    await held;
    const cancel = await owner.native(`/v1/sessions/${id}/turns/2/cancel`, {});
    expect(cancel.status, await cancel.text()).toBe(200);
    await release('aborted');
    const refusal = (await sent) as InstanceType<typeof OpenAI.ConflictError>;
    expect(refusal).toBeInstanceOf(OpenAI.ConflictError);
    expect(refusal.code).toBe('turn_cancelled');
    await owner.drain();
    const sessions = async () =>
      ((await (await owner.native('/v1/sessions?limit=100')).json()) as { sessions: unknown[] }).sessions;
    const before = await sessions();
    for (let attempt = 0; attempt < 2; attempt++) {
      const again = (await send('slow two')) as InstanceType<typeof OpenAI.ConflictError>;
      expect(again).toBeInstanceOf(OpenAI.ConflictError);
      expect(again.error).toEqual(refusal.error);
      expect(again.headers.get('x-should-retry')).toBe('false');
    }
    await owner.drain();
    expect(slow.signals).toHaveLength(1);
    expect(await sessions()).toEqual(before);
    expect(await texts(owner.openai, id)).toEqual(['user: one', 'assistant: echo: one', 'user: slow two']);
    // Its count is refused alike where the count goes on in the conversation; a resent history's
    // counts as a `store: false` response's (docs/OPENAI.md, "Counting input tokens").
    const counted = await owner.openai.responses.inputTokens
      .count({ model: 'echo', ...request('slow two') } as OpenAI.Responses.InputTokenCountParams)
      .catch((error: unknown) => error);
    if (start === 'history') expect(counted).toMatchObject({ input_tokens: expect.any(Number) });
    else expect((counted as InstanceType<typeof OpenAI.ConflictError>).error).toEqual(refusal.error);
    // Another input after the cancel is a new request: it runs (a branch, a new conversation, or the next turn).
    const other = (await send('three')) as OpenAI.Responses.Response;
    expect(other.output_text).toBe('echo: three');
    await owner.drain();
    expect(other.conversation!.id === id).toBe(start === 'conversation');
  });
