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
    const native = (path: string, body: unknown) =>
      app.request(`http://tailgate.test${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
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

// The AI SDK reads no `x-should-retry`: it retries every 409, a cancel's too (its `maxRetries`).
for (const keyed of [false, true]) {
  const outcome = keyed ? 'under a key per request is refused again' : 'runs its input again';
  it(`the AI SDK's generateText whose turn is cancelled ${outcome}`, async () => {
    const { held, processes, release } = twoProcesses();
    const [owner] = processes as [(typeof processes)[0]];
    const { id } = await owner.openai.conversations.create({});
    await owner.openai.responses.create({ input: 'one', conversation: id });
    const model = owner.aiSdk(keyed)('echo');
    const options = { model, prompt: 'slow two', maxRetries: 1, providerOptions: { openai: { conversation: id } } };
    const sent = generateText(options).catch((error: unknown) => error);
    await held;
    const cancel = await owner.native(`/v1/sessions/${id}/turns/2/cancel`, {});
    expect(cancel.status, await cancel.text()).toBe(200);
    // Its retry, once sent, completes.
    await release('aborted');
    const answer = await sent;
    await owner.drain();
    const stored = await texts(owner.openai, id);
    if (keyed) {
      // The retry carries the step's key: answered the stored refusal, nothing run again.
      expect(APICallError.isInstance((answer as { lastError?: unknown }).lastError)).toBe(true);
      expect((answer as { lastError: APICallError }).lastError.statusCode).toBe(409);
      expect(stored).toEqual(['user: one', 'assistant: echo: one', 'user: slow two']);
    } else {
      expect((answer as { text?: string }).text).toBe('echo: slow two');
      expect(stored).toEqual([
        'user: one',
        'assistant: echo: one',
        'user: slow two',
        'user: slow two',
        'assistant: echo: slow two',
      ]);
    }
  });
}
