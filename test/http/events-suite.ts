import { describe, expect, it } from 'vitest';
import { settled } from './background-suite.ts';
import { createClient, parseSse, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Resumable event streams through the real app: a streamed or background turn journals its
 * events, and `GET .../turns/{turn}/events` replays them from any point (`?after`,
 * `Last-Event-ID`) and follows a running turn to its end. Runs on Node
 * (test/http/http.test.ts) and inside workerd (test/workers/http-turns.test.ts).
 */
export function defineEventsSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);
  const auth = { authorization: `Bearer ${TOKEN}` };

  /** Reads at most `limit` events of the event route (then disconnects), with their ids. */
  async function readEvents(path: string, headers: Record<string, string> = {}, limit = Infinity) {
    const response = await harness.fetch(path, { headers: { ...auth, ...headers } });
    if (!response.ok) return { status: response.status, events: [], body: await response.json() };
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    const events: { id: number; event: string; data: any }[] = [];
    let text = '';
    while (events.length < limit) {
      const chunk = await reader.read();
      if (chunk.done) break;
      text += decoder.decode(chunk.value, { stream: true });
      const frames = text.split('\n\n');
      text = frames.pop()!;
      for (const frame of frames) {
        const id = Number(/^id: (\d+)$/m.exec(frame)?.[1]);
        const [parsed] = parseSse(`${frame}\n\n`);
        if (parsed && events.length < limit) events.push({ id, ...parsed });
      }
    }
    await reader.cancel().catch(() => undefined);
    return { status: response.status, events, body: null };
  }

  const words = (count: number) => Array.from({ length: count }, (_, index) => `w${index}`).join(' ');

  describe(`${label}: turn event journals`, () => {
    it('replays a streamed turn from the start, after N, and after Last-Event-ID', async () => {
      const id = await api.session();
      const streamed = await harness.fetch(`/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ input: words(12), stream: true }),
      });
      const liveText = await streamed.text();
      const live = parseSse(liveText);
      const all = await readEvents(`/v1/sessions/${id}/turns/1/events`);
      expect(all.status).toBe(200);
      expect(all.events.map(({ event, data }) => ({ event, data }))).toEqual(live);
      expect(all.events.map((event) => event.id)).toEqual(live.map((_, index) => index + 1));
      // The live stream numbers its events as the journal does: Last-Event-ID resumes it.
      const liveIds = liveText
        .split('\n\n')
        .filter((frame) => frame.trim() !== '')
        .map((frame) => Number(/^id: (\d+)$/m.exec(frame)?.[1]));
      expect(liveIds).toEqual(all.events.map((event) => event.id));
      const after = await readEvents(`/v1/sessions/${id}/turns/1/events?after=3`);
      expect(after.events.map((event) => event.id)).toEqual(live.slice(3).map((_, index) => index + 4));
      const resumed = await readEvents(`/v1/sessions/${id}/turns/1/events`, { 'last-event-id': '5' });
      expect(resumed.events.map((event) => event.id)[0]).toBe(6);
      expect(resumed.events.at(-1)?.event).toBe('turn.completed');
      // An EventSource opened on ?after=2 reconnects to the same URL with the last id it saw.
      const reconnected = await readEvents(`/v1/sessions/${id}/turns/1/events?after=2`, { 'last-event-id': '5' });
      expect(reconnected.status).toBe(200);
      expect(reconnected.events.map((event) => event.id)).toEqual(live.slice(5).map((_, index) => index + 6));
    });

    it('answers 204 to a reader that has the end of an ended turn, so an EventSource stops reconnecting', async () => {
      const id = await api.session();
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: words(4), background: true })).status).toBe(202);
      expect((await settled(api, id, 1)).status).toBe('completed');
      const all = await readEvents(`/v1/sessions/${id}/turns/1/events`);
      const end = all.events.at(-1)!;
      expect(end.event).toBe('turn.completed');
      // What an EventSource sends when the stream it read to the end closes: the last id it saw.
      for (const headers of [{ 'last-event-id': String(end.id) }, { 'last-event-id': String(end.id - 1) }]) {
        const response = await harness.fetch(`/v1/sessions/${id}/turns/1/events?after=${end.id}`, {
          headers: { ...auth, ...headers },
        });
        expect(response.status).toBe(204);
        expect(await response.text()).toBe('');
      }
      // One before the end still gets the end.
      const last = await readEvents(`/v1/sessions/${id}/turns/1/events`, { 'last-event-id': String(end.id - 1) });
      expect(last.status).toBe(200);
      expect(last.events).toEqual([end]);
    });

    it('follows a background turn live and, reconnecting at random points, gets every event once', async () => {
      const id = await api.session();
      const input = words(40);
      expect((await api.post(`/v1/sessions/${id}/turns`, { input, background: true })).status).toBe(202);
      const seen: { id: number; event: string; data: any }[] = [];
      // Disconnects after a pseudo-random number of events, then resumes from the last id.
      let state = 7;
      for (let connections = 0; connections < 200 && seen.at(-1)?.event !== 'turn.completed'; connections++) {
        state = (state * 48271) % 2147483647;
        const part = await readEvents(
          `/v1/sessions/${id}/turns/1/events`,
          seen.length > 0 ? { 'last-event-id': String(seen.at(-1)!.id) } : {},
          1 + (state % 9),
        );
        expect(part.status).toBe(200);
        seen.push(...part.events);
      }
      expect(seen.map((event) => event.id)).toEqual(seen.map((_, index) => index + 1));
      const text = seen
        .filter((event) => event.event === 'output_text.delta')
        .map((event) => event.data.delta)
        .join('');
      expect(text).toBe(`echo: ${input}`);
      expect((await settled(api, id, 1)).status).toBe('completed');
    });

    it("reads a turn's journal where the turn is: after a later turn's delete, and in a fork", async () => {
      const id = await api.session();
      const streamed = await harness.fetch(`/v1/sessions/${id}/turns`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ input: words(6), stream: true }),
      });
      const live = parseSse(await streamed.text());
      const before = await readEvents(`/v1/sessions/${id}/turns/1/events`);
      expect(before.events.map(({ event, data }) => ({ event, data }))).toEqual(live);
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'two' })).status).toBe(200);
      expect((await api.delete(`/v1/sessions/${id}/turns/2`)).status).toBe(200);
      const after = await readEvents(`/v1/sessions/${id}/turns/1/events`);
      expect(after.status).toBe(200);
      expect(after.events).toEqual(before.events);
      const fork = (await api.post(`/v1/sessions/${id}/fork`, { at_turn: 1 })).body.id;
      const forked = await readEvents(`/v1/sessions/${fork}/turns/1/events`);
      expect(forked.status).toBe(200);
      expect(forked.events).toEqual(before.events);
    });

    it("numbers no event of a streamed turn's replay by its key: the journal is the first run's", async () => {
      const id = await api.session();
      const send = () =>
        harness.fetch(`/v1/sessions/${id}/turns`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `k-${id}` },
          body: JSON.stringify({ input: words(8), stream: true }),
        });
      const first = parseSse(await (await send()).text());
      const journaled = await readEvents(`/v1/sessions/${id}/turns/1/events`);
      expect(journaled.events.map(({ event, data }) => ({ event, data }))).toEqual(first);
      const replayText = await (await send()).text();
      expect(parseSse(replayText)[0]).toMatchObject({ event: 'turn.started' });
      expect(replayText).not.toMatch(/^id: /m);
      // The journal is still the first run's, whole and ended.
      expect((await readEvents(`/v1/sessions/${id}/turns/1/events`)).events).toEqual(journaled.events);
    });

    it('answers 404 for a turn without a journal, and 400 for a bad after', async () => {
      const id = await api.session();
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'plain' })).status).toBe(200);
      const plain = await readEvents(`/v1/sessions/${id}/turns/1/events`);
      expect(plain.status).toBe(404);
      expect((await readEvents(`/v1/sessions/${id}/turns/9/events`)).status).toBe(404);
      // Past what a turn's number can be (a record key's 12 digits): 404 too, not a 500.
      for (const turn of ['1000000000000', '9007199254740991']) {
        const past = await readEvents(`/v1/sessions/${id}/turns/${turn}/events`);
        expect(past.status, turn).toBe(404);
      }
      expect((await readEvents(`/v1/sessions/${id}/turns/1/events?after=-1`)).status).toBe(400);
      // A whole number too long to be an event's says so, not that it is no integer.
      const long = await api.get(`/v1/sessions/${id}/turns/1/events?after=${'9'.repeat(17)}`);
      expect(long.status).toBe(400);
      expect(long.body.error.message).toBe('query.after: must be a non-negative integer of at most 16 digits');
      // Every safe integer is taken (as the facade's starting_after and Last-Event-ID take it), none past it.
      const last = String(Number.MAX_SAFE_INTEGER);
      expect((await readEvents(`/v1/sessions/${id}/turns/1/events?after=${last}`)).status).toBe(404);
      const header = await api.get(`/v1/sessions/${id}/turns/1/events`, { 'last-event-id': last });
      expect(header.status, JSON.stringify(header.body)).toBe(404);
      for (const [path, headers, field] of [
        [`?after=9007199254740992`, {}, 'query.after'],
        ['', { 'last-event-id': '9007199254740992' }, 'header.last-event-id'],
      ] as const) {
        const past = await api.get(`/v1/sessions/${id}/turns/1/events${path}`, headers);
        expect(past.status, field).toBe(400);
        expect(past.body.error.message).toBe(`${field}: must be at most 9007199254740991`);
      }
    });
  });
}
