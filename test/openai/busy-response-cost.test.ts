import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { CountingStore } from '../support/counting-store.ts';
import { clientInProcess, TOKEN } from './server.ts';

// What a stored response under `conversation` costs in storage calls when its conversation's
// turn runs within the lease its claim took (answered 409 `turn_in_progress`), whether that turn
// is answered at its end or streamed: its look for a dead turn to close (lib/openai/dead-turn.ts)
// reads nothing past the head, whose record names that lease; answered, the 409 reads the lease
// renewed beside that record (one get: lib/session/log/busy-lease.ts). The records it lists are
// this process's, taken from the record cache (lib/session/log/record-cache.ts), not got.

/** The echo model, a prompt ending with "slow" held until `release`. */
function heldEcho() {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let reached = () => {};
  const held = new Promise<void>((resolve) => (reached = resolve));
  const slow = async (request: ModelRequest) => {
    if (JSON.stringify(request.prompt.at(-1)).includes('slow')) {
      reached();
      await gate;
    }
  };
  const model: Model = {
    ...echoModel,
    async generate(request) {
      await slow(request);
      return echoModel.generate(request);
    },
    async *stream(request) {
      await slow(request);
      yield* echoModel.stream(request);
    },
  };
  return { model, release, held };
}

it.each([
  [false, 4],
  [true, 5],
])('a response meeting a running turn (streamed: %s) costs %i gets and 4 lists', async (stream, gets) => {
  const { model, release, held } = heldEcho();
  const store = new CountingStore(new MemoryStore());
  const app = createApp({
    store: () => store,
    readEnvironment: () => ({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }),
    log: () => {},
    logLine: () => {},
    wrapModel: () => model,
  });
  const openai = clientInProcess(app, TOKEN);
  const { id } = await openai.conversations.create({});
  await openai.responses.create({ input: 'one', conversation: id });
  const running = (async () => {
    const response = await openai.responses.create({ input: 'slow', conversation: id, stream } as never);
    if (stream) for await (const _ of response as unknown as AsyncIterable<unknown>);
  })();
  try {
    await held;
    store.reset();
    const busy = await openai.responses.create({ input: 'two', conversation: id }).catch((error: unknown) => error);
    expect(busy).toMatchObject({ status: 409, code: 'turn_in_progress' });
    const { get, head, put, list, delete: deletes } = store.counts;
    expect({ get, head, put, list, delete: deletes }).toEqual({ get: gets, head: 0, put: 0, list: 4, delete: 0 });
  } finally {
    release();
  }
  await running;
});
