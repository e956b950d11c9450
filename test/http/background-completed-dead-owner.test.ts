import { describe, expect, it } from 'vitest';
import { parseResponseId } from '../../lib/openai/ids.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { diesAfterCompletion } from '../support/dies-after-completion.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { nativeResponseId } from '../support/native-response-id.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, parseSse, TOKEN } from './http-suite.ts';

// A background turn (native, and a facade response created with background: true) whose runner's
// process dies after the turn's completion landed, at its journal's last batch: a reader on
// another process ends its events a lease after the completion with turn.completed carrying the
// stored answer once, and the facade's stream with response.completed as GET answers it.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const heldEcho = releasedAfterEach();

describe('a background turn whose process died after its completion, at its last batch', () => {
  it.each(['native', 'facade'] as const)('a %s one ends with turn.completed once', async (kind) => {
    const store = new MemoryStore();
    const faulty = new FaultyStore(store);
    const dying = diesAfterCompletion(faulty, 'last batch');
    const slow = heldEcho();
    const { options, drain } = heldOptions(slow.model);
    const owner = createClient(appHarness(faulty, environment, options));
    let session: string;
    let response: string;
    if (kind === 'native') {
      session = await owner.session();
      const queued = await owner.post(`/v1/sessions/${session}/turns`, { input: 'slow one', background: true });
      expect(queued.status).toBe(202);
      response = await nativeResponseId(store, session);
    } else {
      const queued = await owner.post('/v1/responses', { model: 'echo', input: 'slow one', background: true });
      expect(queued.status).toBe(200);
      response = queued.body.id;
      session = parseResponseId(response)!.sessionId;
    }
    await expect.poll(() => dying.batches).toBe(1);
    slow.release();
    await drain();
    expect(dying.stopped).toMatchObject({ operation: 'put' });
    const api = createClient(appHarness(store, environment, heldOptions(heldEcho().model).options));
    expect((await api.get(`/v1/sessions/${session}/turns/1`)).body.status).toBe('completed');
    const [events, stream] = await Promise.all([
      api.get(`/v1/sessions/${session}/turns/1/events`),
      api.get(`/v1/responses/${response}?stream=true`),
    ]);
    const all = parseSse(events.body as string);
    expect(all.filter((event) => event.event === 'turn.completed')).toHaveLength(1);
    expect(all.at(-1)!.event).toBe('turn.completed');
    expect(all.filter((event) => event.event === 'output_item.done')).toHaveLength(1);
    const facade = parseSse(stream.body as string);
    const retrieved = (await api.get(`/v1/responses/${response}`)).body;
    expect(retrieved.status).toBe('completed');
    expect(facade.filter((event) => event.event === 'response.completed')).toHaveLength(1);
    expect(facade.at(-1)).toMatchObject({ event: 'response.completed', data: { response: retrieved } });
    expect(facade.filter((event) => event.event === 'response.output_item.done')).toHaveLength(1);
  });
});
