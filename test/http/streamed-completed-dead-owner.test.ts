import { describe, expect, it } from 'vitest';
import { parseResponseId } from '../../lib/openai/ids.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { appHarness } from '../support/app-harness.ts';
import { diesAfterCompletion, type Stop } from '../support/dies-after-completion.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { memoryAndFileStores } from '../support/local-stores.ts';
import { nativeResponseId } from '../support/native-response-id.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { sseReader } from '../support/sse-reader.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A streamed turn (a native `stream: true` turn, and a streamed facade response) whose process
// dies after its completion landed and before its journal's last batch: after its first batch,
// the process stops at its k-th storage call after the completion (that call and every later one
// fail), for each k up to its last, and at its final batch's put. Readers on another
// process, two native and two through the facade at once, then one more of each, resumed or from
// the start: the events end, a lease after the completion, with `turn.completed` carrying the
// stored answer exactly once, numbered after the journaled events, the same for every reader
// (the first reader's end is the journal's); the facade's resumed stream with response.completed
// carrying the response as GET answers it. On the memory store and the file store.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const stores = await memoryAndFileStores('streamed-completed-dead-owner');
const heldEcho = releasedAfterEach();

/** Server-sent events with their ids. */
function numbered(text: string): { id: number; event: string; data: any }[] {
  const ids = text
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => Number(/^id: (\d+)$/m.exec(frame)?.[1]));
  return parseSse(text).map((event, index) => ({ id: ids[index]!, ...event }));
}

/**
 * A streamed turn of `kind` on `store` whose process stops at `stop` (that call and every later
 * one fail; Infinity: it lives): its session, its response id, what its own client got, the call
 * it stopped at, and how many calls it made after the completion.
 */
async function ownerOf(store: ObjectStore, kind: 'native' | 'facade', stop: Stop) {
  const faulty = new FaultyStore(store);
  const dying = diesAfterCompletion(faulty, stop);
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const harness = appHarness(faulty, environment, options);
  const native = kind === 'native' ? await createClient(harness).session() : undefined;
  const path = native ? `/v1/sessions/${native}/turns` : '/v1/responses';
  const reader = sseReader(
    await harness.fetch(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo', input: 'slow one', stream: true }),
    }),
  );
  const opened = parseSse(
    await reader.until(native ? 'event: output_text.delta' : 'event: response.output_text.delta'),
  );
  // Its first batch (a second after turn.started) is written before the model answers.
  await expect.poll(() => dying.batches).toBe(1);
  slow.release();
  const live = parseSse(await reader.rest());
  await drain();
  const response = native
    ? await nativeResponseId(store, native)
    : (opened.find((event) => event.event === 'response.created')!.data.response.id as string);
  return {
    session: native ?? parseResponseId(response)!.sessionId,
    response,
    live,
    stopped: dying.stopped,
    calls: dying.after,
  };
}

/** How many storage calls a streamed turn of `kind` makes after its completion put. */
async function callsAfterCompletion(storeOf: () => ObjectStore, kind: 'native' | 'facade') {
  return (await ownerOf(storeOf(), kind, Number.POSITIVE_INFINITY)).calls;
}

describe.each(stores)('a streamed turn whose process died after its completion: %s', (_, storeOf) => {
  it.each(['native', 'facade'] as const)(
    'a %s turn ends with turn.completed and its answer once, whichever call after the completion it stopped at',
    async (kind) => {
      const total = await callsAfterCompletion(storeOf, kind);
      expect(total).toBeGreaterThan(1);
      // Each call after it (their order varies a little from run to run), and its last batch's put.
      const stops: Stop[] = [...Array.from({ length: total }, (_, index) => index + 1), 'last batch'];
      const stopped = await Promise.all(
        stops.map(async (stop) => {
          const store = storeOf();
          const owner = await ownerOf(store, kind, stop);
          const api = createClient(appHarness(store, environment, heldOptions(heldEcho().model).options));
          const events = (after?: number) =>
            api.get(`/v1/sessions/${owner.session}/turns/1/events`, after ? { 'last-event-id': String(after) } : {});
          const turn = await api.get(`/v1/sessions/${owner.session}/turns/1`);
          expect(turn.body.status).toBe('completed');
          const resumed = () => api.get(`/v1/responses/${owner.response}?stream=true`);
          // Two native readers (from the start, and resumed after turn.started) and two through the facade, at once.
          const [whole, past, first, second] = await Promise.all([events(), events(1), resumed(), resumed()]);
          const [again, facadeAgain] = await Promise.all([events(), resumed()]);
          const all = numbered(whole.body as string);
          expect(all.map((event) => event.id)).toEqual(all.map((_, index) => index + 1));
          const completed = all.filter((event) => event.event === 'turn.completed');
          expect(completed).toHaveLength(1);
          expect(all.at(-1)!.event).toBe('turn.completed');
          const answer = completed[0]!.data;
          expect(answer).toMatchObject({ session_id: owner.session, turn: 1 });
          expect(answer.output).toMatchObject([{ type: 'message', role: 'assistant', seq: 2 }]);
          // What its own client got, when its stream answered it.
          const told = owner.live.find((event) => event.event === 'turn.completed');
          if (told) expect(answer).toEqual(told.data);
          // The item once, finished before the end, as a live owner journals it.
          expect(all.filter((event) => event.event === 'output_item.done')).toMatchObject([
            { data: { item: answer.output[0] } },
          ]);
          expect(numbered(past.body as string)).toEqual(all.slice(1));
          expect(numbered(again.body as string)).toEqual(all);
          const retrieved = (await api.get(`/v1/responses/${owner.response}`)).body;
          expect(retrieved.status).toBe('completed');
          for (const stream of [first, second, facadeAgain]) {
            expect(stream.status).toBe(200);
            const facade = parseSse(stream.body as string);
            expect(facade.filter((event) => event.event === 'response.completed')).toHaveLength(1);
            expect(facade.at(-1)).toMatchObject({ event: 'response.completed', data: { response: retrieved } });
            expect(facade.filter((event) => event.event === 'response.output_item.done')).toHaveLength(1);
            expect(facade.map((event) => event.data.sequence_number)).toEqual(facade.map((_, index) => index));
          }
          expect(parseSse(first.body as string)).toEqual(parseSse(second.body as string));
          return owner.stopped;
        }),
      );
      expect(stopped.at(-1)).toMatchObject({ operation: 'put', key: expect.stringContaining('/events/') });
    },
  );
});
