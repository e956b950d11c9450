import OpenAI from 'openai';
import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { HeldStore } from '../support/held-store.ts';
import { SessionLog } from '../support/session-log.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { environment, noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';
import { TOKEN } from './server.ts';

// A response answered at its end that an `interrupt` cancelled is taken out as a dead one
// (lib/turn/dead-turn.ts) whatever became of the interrupt after its cancel: the `openai`
// client's retry of its 409 `turn_cancelled` stores its input once.

noBodyHeldAfterEach();
const heldEcho = releasedAfterEach();

/**
 * An app on a new memory store whose model calls `slow` holds, and the official client of it
 * (its default retries unless `client` says otherwise).
 */
function heldClient(slow: ReturnType<typeof heldEcho>, client: { maxRetries?: number } = {}) {
  const store = new MemoryStore();
  const { options, drain } = heldOptions(slow.model);
  const app = createApp({ store: () => store, readEnvironment: () => environment, ...options });
  const openai = new OpenAI({
    apiKey: TOKEN,
    baseURL: 'http://tailgate.test/v1',
    ...client,
    fetch: async (url: string | URL | Request, init?: RequestInit) => app.request(String(url), init),
  });
  return { store, openai, drain };
}

/**
 * A conversation whose first response completed and whose second, `slow two`, is sent by the
 * official client (its default retries) and held in its model call (`held`): its store, id, the
 * response's promise (`sent`) and `release`, which lets the model answer.
 */
async function heldSecondStep() {
  const slow = heldEcho();
  const { store, openai, drain } = heldClient(slow);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'one', conversation: id });
  const sent = openai.responses.create({ input: 'slow two', conversation: id });
  await slow.reached;
  return { store, id, openai, sent, drain, release: slow.release };
}

/** A native turn's request body interrupting what runs. */
const interrupting = { input: 'native', on_busy: 'interrupt' };

for (const after of ['its process died', 'its store failed'] as const)
  it(`a response interrupted, the interrupt's take-out never run (${after}), is taken out by its retry`, async () => {
    const step = await heldSecondStep();
    if (after === 'its process died') {
      // The interrupting process cancelled the turn, then died before it took it out.
      await new SessionLog(step.store).cancelTurn(step.id, 2, true);
    } else {
      // Every call after the cancel's completion fails.
      let cancelled = false;
      const fails = (call: { operation: string; key: string }) => {
        if (cancelled) return true;
        if (call.operation === 'put' && call.key.endsWith('.done')) cancelled = true;
        return false;
      };
      const other = processOf(step.store, 0, { fails });
      const turn = await other.native('POST', `/v1/sessions/${step.id}/turns`, interrupting);
      expect(turn.status, turn.body).toBeGreaterThanOrEqual(500);
      await other.drain();
    }
    step.release();
    // The client retries the 409 `turn_cancelled` by itself.
    expect((await step.sent).status).toBe('completed');
    await step.drain();
    expect(await texts(step.openai, step.id)).toEqual([
      'user: one',
      'assistant: echo: one',
      'user: slow two',
      'assistant: echo: slow two',
    ]);
  });

it("a response interrupted whose retry claims before the interrupt's take-out stores its input once", async () => {
  const step = await heldSecondStep();
  // The interrupting process, its calls after the cancel's completion held until the retry is answered.
  const held = new HeldStore(step.store);
  let cancelled = false;
  const hold = held.hold((call) => {
    if (cancelled) return true;
    if (call.operation === 'put' && call.keys[0]!.endsWith('.done')) cancelled = true;
    return false;
  });
  const { options, drain } = heldOptions(heldEcho().model);
  const app = createApp({ store: () => held, readEnvironment: () => environment, ...options });
  const turn = app.request(`http://tailgate.test/v1/sessions/${step.id}/turns`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(interrupting),
  });
  await hold.reached;
  step.release();
  expect((await step.sent).status).toBe('completed');
  hold.release();
  const answer = await turn;
  expect(answer.status, await answer.text()).toBe(200);
  await drain();
  await step.drain();
  expect(await texts(step.openai, step.id)).toEqual([
    'user: one',
    'assistant: echo: one',
    'user: slow two',
    'assistant: echo: slow two',
    'user: native',
    'assistant: echo: native',
  ]);
});

it('a native turn takes out a response its interrupt cancelled but never took out: the retry follows', async () => {
  const step = await heldSecondStep();
  // The interrupting process cancelled the turn, then died before it took it out.
  await new SessionLog(step.store).cancelTurn(step.id, 2, true);
  // The native turn's claim refuses the cancelled response as a dead one, and takes it out.
  const other = processOf(step.store, 0);
  const turn = await other.native('POST', `/v1/sessions/${step.id}/turns`, { input: 'native' });
  expect(turn.status, turn.body).toBe(200);
  await other.drain();
  step.release();
  expect((await step.sent).status).toBe('completed');
  await step.drain();
  expect(await texts(step.openai, step.id)).toEqual([
    'user: one',
    'assistant: echo: one',
    'user: native',
    'assistant: echo: native',
    'user: slow two',
    'assistant: echo: slow two',
  ]);
});

it('a response cancelled by a cancel, not an interrupt, stays: a native turn goes on after it', async () => {
  const step = await heldSecondStep();
  await new SessionLog(step.store).cancelTurn(step.id, 2);
  step.release();
  // A cancel's 409 says `x-should-retry: false`: the client does not retry.
  await expect(step.sent).rejects.toBeInstanceOf(OpenAI.ConflictError);
  const other = processOf(step.store, 0);
  const turn = await other.native('POST', `/v1/sessions/${step.id}/turns`, { input: 'native' });
  expect(turn.status, turn.body).toBe(200);
  await other.drain();
  await step.drain();
  expect(await texts(step.openai, step.id)).toEqual([
    'user: one',
    'assistant: echo: one',
    'user: slow two',
    'user: native',
    'assistant: echo: native',
  ]);
});

it('a response interrupted that took notices stays: its interrupt tries its take-out once, logged once', async () => {
  const slow = heldEcho();
  const { store, openai, drain } = heldClient(slow, { maxRetries: 0 });
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'one', conversation: id });
  // The held response takes the notice (its prompt ends with it), so its delete is refused.
  const other = processOf(store, 0);
  const note = await other.native('POST', `/v1/sessions/${id}/inbox`, { name: 'note.md', content: 'slow note' });
  expect(note.status, note.body).toBe(201);
  const sent = openai.responses.create({ input: 'two', conversation: id }).catch((error: unknown) => error);
  await slow.reached;
  // Another process interrupts it: each storage call it makes is counted.
  const calls: string[] = [];
  const counted = (call: { operation: string }) => {
    calls.push(call.operation);
    return false;
  };
  const interrupting = processOf(store, 0, { fails: counted });
  const turn = await interrupting.native('POST', `/v1/sessions/${id}/turns`, { input: 'native', on_busy: 'interrupt' });
  expect(turn.status, turn.body).toBe(200);
  expect(JSON.parse(turn.body)).toMatchObject({ turn: 3 });
  const count = (operation: string) => calls.filter((call) => call === operation).length;
  // One read of the newest turn and one refused delete (its reads and listings), then a claim
  // that follows it: before, the claim refused it, and it was read and refused again. Records
  // this process wrote or read come from its record cache (log/record-cache.ts), not got.
  expect({ get: count('get'), list: count('list'), put: count('put'), delete: count('delete') }).toEqual({
    get: 12,
    list: 9,
    put: 6,
    delete: 0,
  });
  const stays = interrupting.logged.filter((line) => line.includes('stays in its session'));
  // Named by the request whose turn found it (its x-request-id).
  expect(stays).toEqual([
    expect.stringMatching(
      new RegExp(`^tailgate: turn 2 of ${id}, interrupted, stays in its session \\(req_[0-9a-f]{24}\\)$`),
    ),
  ]);
  await interrupting.drain();
  slow.release();
  expect(await sent).toMatchObject({ status: 409, code: 'turn_cancelled' });
  await drain();
  await other.drain();
});
