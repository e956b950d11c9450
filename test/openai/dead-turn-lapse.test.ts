import OpenAI from 'openai';
import type { Response } from 'openai/resources/responses/responses';
import { afterEach, expect, it } from 'vitest';
import { type AppOptions, createApp } from '../../functions/app.ts';
import { heldBodyBytes } from '../../functions/body-budget.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { clientInProcess, TOKEN } from './server.ts';

// A response under `conversation` whose process died mid-turn leaves its turn open. The client's
// retry (the same input) takes that turn out once its lease ran out (lib/openai/dead-turn.ts),
// and is refused 409 while it runs. The lease may run out between the two: after the retry read
// it running, before its own claim read it. The claim then must not close the dead turn and
// store the input after it: the input would be in the conversation twice. So too for a retry
// sent in the background (`background: true`), whose claim is the background turn's.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const heldEcho = releasedAfterEach();

/** The dead steps' requests: each answered once its held call is released after its test. */
const deadSteps: { release(): void; sent: Promise<unknown> }[] = [];

afterEach(async () => {
  for (const { release, sent } of deadSteps.splice(0)) {
    release();
    await sent;
  }
  // No request of the test is left in the app (its body would count in the next file's budget).
  expect(heldBodyBytes()).toBe(0);
});

function client(store: FaultyStore | MemoryStore, options: Partial<AppOptions>) {
  const app = createApp({ store: () => store, readEnvironment: () => environment, log: () => {}, ...options });
  return clientInProcess(app, TOKEN);
}

type Step = (openai: OpenAI, first: Response, background?: true) => Promise<Response>;

/** Step two ('slow two') of a conversation, as each kind of client sends it (`background`: in the background). */
const steps: Record<string, Step> = {
  conversation: (openai, first, background) =>
    openai.responses.create({
      input: 'slow two',
      conversation: first.conversation!.id,
      ...(background && { background }),
    }),
  previous_response_id: (openai, first, background) =>
    openai.responses.create({
      input: 'slow two',
      previous_response_id: first.id,
      store: true,
      ...(background && { background }),
    }),
  'a resent history': (openai, first, background) =>
    openai.responses.create({
      input: [
        { role: 'user', content: 'one' },
        { role: 'assistant', content: first.output_text },
        { role: 'user', content: 'slow two' },
      ],
      store: true,
      ...(background && { background }),
    }),
};

/** A conversation's answered first step, and its second step running in a process that died. */
async function deadStep(store: MemoryStore, step: Step): Promise<Response> {
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const dead = client(store, options);
  const first = await dead.responses.create({ input: 'one', store: true });
  // The work its answer left (its history index entry) is done before the second step.
  await drain();
  const sent = step(dead, first).catch(() => undefined);
  deadSteps.push({ release: slow.release, sent });
  // Held, it ends only once released: ended first, it never reached its model.
  const ended = sent.then(() => {
    throw new Error('the dead step never reached its model');
  });
  await Promise.race([slow.reached, ended]);
  return first;
}

/**
 * The retry (in the background with `background`) from another process whose clock passes the
 * dead turn's lease once its `at`-th storage call was made: its answer (409 when the lease still
 * ran), `settled`, the answer once the work the process left after it (a background turn's run)
 * ended, and `drained`, how many calls it made once that work ended.
 */
async function retry(store: MemoryStore, step: Step, first: Response, at: number, background?: true) {
  let now = Date.now();
  let calls = 0;
  const faulty = new FaultyStore(store).failWhen(() => {
    calls += 1;
    if (calls === at) now += 3_600_000;
    return false;
  });
  const lines: string[] = [];
  const tasks: Promise<unknown>[] = [];
  const other = client(faulty, {
    clock: () => new Date(now),
    logLine: (line) => lines.push(line),
    afterResponse: (task) => void tasks.push(task),
  });
  const send = () => step(other, first, background);
  const answer = await send().catch((error: unknown) => error);
  const drained = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
    return calls;
  };
  const settled = async (response: Response) => {
    await drained();
    return background ? other.responses.retrieve(response.id) : response;
  };
  return { answer, other, lines, send, settled, drained, expire: () => (now += 3_600_000) };
}

const texts = async (openai: OpenAI, id: string) =>
  (await openai.conversations.items.list(id, { order: 'asc' })).data.map((item) =>
    item.type === 'message'
      ? `${item.role}: ${item.content.map((part) => ('text' in part ? part.text : '')).join('')}`
      : item.type,
  );

// Each kind of step, retried in the foreground and in the background, with every storage call of
// a retry refused 409 (the lease ran out before one of them, or after all of them), or of a resent
// history's (with the work it left after its answer), as the point where its clock passes the lease.
const cases: [string, string, number][] = [];
for (const [kind, step] of Object.entries(steps))
  for (const background of [undefined, true] as const) {
    const store = new MemoryStore();
    const calls = await (await retry(store, step, await deadStep(store, step), 0, background)).drained();
    const how = background ? 'in the background' : 'in the foreground';
    for (let at = 1; at <= calls + 1; at++) cases.push([kind, how, at]);
  }

it.each(cases)(
  'a retry of a step sent by %s, %s, whose clock passes the dead turn lease after call %i stores its input once',
  async (kind, how, at) => {
    const step = steps[kind]!;
    const store = new MemoryStore();
    const first = await deadStep(store, step);
    const retried = await retry(store, step, first, at, how === 'in the background' || undefined);
    let { answer } = retried;
    if (answer instanceof OpenAI.APIError) {
      expect(answer.status).toBe(409);
      retried.expire();
      answer = await retried.send();
    }
    answer = await retried.settled(answer as Response);
    expect(answer).toMatchObject({ status: 'completed', output_text: 'echo: slow two' });
    // A resent history whose conversation runs a turn (its lease not run out when the retry
    // looked) starts a conversation of its own, as a resend racing another step does.
    const conversation = (answer as Response).conversation!;
    if (kind !== 'a resent history') expect(conversation).toEqual(first.conversation);
    expect(await texts(retried.other, conversation.id)).toEqual([
      'user: one',
      'assistant: echo: one',
      'user: slow two',
      'assistant: echo: slow two',
    ]);
    // Its turn log tells the dead turn's close (when this process closed it), a 409 and the retry's
    // own turn, not the claim the lapse refused (which ran no turn) as a turn failed `internal_error`.
    const told = retried.lines.map((line) => JSON.parse(line)).filter((line) => line.event === 'turn');
    expect(told.filter((line) => line.error_code === 'internal_error')).toEqual([]);
  },
);
