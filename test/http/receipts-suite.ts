import { describe, expect, it } from 'vitest';
import { SessionLog } from '../support/session-log.ts';
import { createClient, freshId, TOKEN, type HttpHarness } from './http-suite.ts';

/**
 * Turn receipts and the session listing through the real app (the data behind /ui): turns
 * newest first with their outcome and seq ranges, what the model saw (whole, compacted,
 * dropped) rebuilt from the receipt and the stored items, the reused prompt prefix, the same
 * answers once the records are packed into segments, and the session listing. Runs in
 * Node (test/http/http.test.ts) and inside workerd (test/workers/http.test.ts).
 */
export function defineReceiptSuite(label: string, harness: HttpHarness): void {
  const api = createClient(harness);
  const readTool = {
    type: 'function',
    name: 'read',
    parameters: { type: 'object', properties: { n: { type: 'number' } } },
  };

  /** A tool-using session: `calls` rounds of call + output; old outputs get compacted. */
  async function toolSession(calls: number) {
    const id = await api.session({
      instructions: 'Read everything.',
      tools: [readTool],
      strategies: ['shorten_tools_epoch', 'inbox'],
      strategy_config: {
        epoch_tool_call_threshold: 3,
        epoch_full_tool_calls: 1,
        epoch_compacted_tool_calls: 1,
        epoch_size: 1,
      },
    });
    const responses: any[] = [];
    for (let index = 1; index <= calls; index++) {
      const asked = await api.post(`/v1/sessions/${id}/turns`, { input: `call read {"n":${index}}` });
      expect(asked.status, JSON.stringify(asked.body)).toBe(200);
      responses.push(asked.body);
      const answered = await api.post(`/v1/sessions/${id}/turns`, {
        input: [
          {
            type: 'function_call_output',
            call_id: asked.body.output[0].call_id,
            output: `page ${index}: ${'lorem ipsum '.repeat(60)}`,
          },
        ],
      });
      expect(answered.status, JSON.stringify(answered.body)).toBe(200);
      responses.push(answered.body);
    }
    return { id, responses };
  }

  async function allTurns(id: string, limit: number): Promise<any[]> {
    const turns: any[] = [];
    let before: number | null | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await api.get(`/v1/sessions/${id}/turns?limit=${limit}${before ? `&before=${before}` : ''}`);
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      expect(page.body.turns.length).toBeLessThanOrEqual(limit);
      turns.push(...page.body.turns);
      if (!page.body.has_more) {
        expect(page.body.next_before).toBeNull();
        return turns;
      }
      before = page.body.next_before;
      expect(before).toBe(page.body.turns.at(-1).turn);
    }
    throw new Error('the turn listing did not end');
  }

  describe(`${label}: turn receipts`, () => {
    it('lists turns newest first in pages, each with its outcome, settings, counts, usage and seq ranges', async () => {
      const { id, responses } = await toolSession(6);
      const turns = await allTurns(id, 5);
      expect(turns.map((turn) => turn.turn)).toEqual([12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
      for (const turn of turns) {
        const response = responses[turn.turn - 1];
        expect(turn).toMatchObject({
          status: 'completed',
          model: 'echo',
          strategies: ['shorten_tools_epoch', 'inbox'],
          error: null,
          notices: [],
        });
        expect(turn.context).toEqual(response.context);
        expect(turn.usage).toEqual(response.usage);
        expect(turn.output).toEqual({ first_seq: response.output[0].seq, last_seq: response.output.at(-1).seq });
        expect(turn.input).toEqual({ first_seq: response.output[0].seq - 1, last_seq: response.output[0].seq - 1 });
        expect(Date.parse(turn.completed_at)).toBeGreaterThanOrEqual(Date.parse(turn.started_at));
      }
      // The first prompt repeats nothing; later ones repeat the instructions at least, never more than they hold.
      expect(turns.at(-1).prefix_reused_chars).toBe(0);
      for (const turn of turns.slice(0, -1)) {
        expect(turn.prefix_reused_chars).toBeGreaterThanOrEqual('Read everything.'.length);
        expect(turn.prefix_reused_chars).toBeLessThanOrEqual(turn.context.prompt_chars);
      }
      // Turn 2 only appends to turn 1's prompt: everything of turn 1 is reused.
      expect(turns.at(-2).prefix_reused_chars).toBe(turns.at(-1).context.prompt_chars);
      // A new epoch compacts older outputs: that turn's prompt diverges early, so it reuses less than its
      // predecessor's whole prompt.
      const diverged = turns.filter(
        (turn, index) => index < turns.length - 1 && turn.prefix_reused_chars < turns[index + 1].context.prompt_chars,
      );
      expect(diverged.length).toBeGreaterThan(0);
    });

    it(
      'rebuilds what the model saw: seq runs by treatment, the compacted text with its hash stamp, and the ' +
        'stored original',
      async () => {
        const { id } = await toolSession(6);
        const detail = await api.get(`/v1/sessions/${id}/turns/12`);
        expect(detail.status, JSON.stringify(detail.body)).toBe(200);
        const { receipt } = detail.body;
        expect(detail.body.turn).toBe(12);
        // The runs cover every seq up to the input, in order, without gaps.
        let next = 1;
        for (const run of receipt.seen) {
          expect(run.first_seq).toBe(next);
          expect(run.last_seq).toBeGreaterThanOrEqual(run.first_seq);
          next = run.last_seq + 1;
        }
        expect(next - 1).toBe(detail.body.input.last_seq);
        const count = (treatment: string) =>
          receipt.seen
            .filter((run: any) => run.treatment === treatment)
            .reduce((sum: number, run: any) => sum + run.last_seq - run.first_seq + 1, 0);
        expect(count('compacted')).toBeGreaterThan(0);
        expect(count('dropped')).toBeGreaterThan(0);
        expect(count('compacted')).toBeGreaterThanOrEqual(detail.body.context.compacted);
        expect(receipt.synthetic).toEqual([
          expect.objectContaining({ synthetic: 'context_notice', content: expect.stringMatching(/./) }),
        ]);

        const items = await api.get(`/v1/sessions/${id}/turns/12/items?limit=1000`);
        expect(items.status).toBe(200);
        expect(items.body.items[0].seq).toBe(detail.body.input.last_seq);
        const compacted = items.body.items.filter((item: any) => item.treatment === 'compacted');
        expect(compacted.length).toBe(count('compacted'));
        const output = compacted.find((item: any) => item.type === 'function_call_output');
        expect(output.compacted_as.output).toMatch(/^\[compacted: \d+ chars, md5 [0-9a-f]{5}\./);
        expect(output.output).toMatch(/^page \d+: (lorem ipsum )+$/);
        expect(
          items.body.items
            .filter((item: any) => item.treatment === 'whole')
            .every((item: any) => item.compacted_as === undefined),
        ).toBe(true);
        // Paging the window: below `before`, newest first.
        const page = await api.get(`/v1/sessions/${id}/turns/12/items?limit=3&before=10`);
        expect(page.body.items.map((item: any) => item.seq)).toEqual([9, 8, 7]);
      },
    );

    it('reports failed and aborted turns and the notices a turn delivered', async () => {
      const id = await api.session();
      await api.post(`/v1/sessions/${id}/inbox`, { name: '0001-note.md', content: 'Budget left: 2 USD' });
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'first' })).status).toBe(200);
      const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'second', model: 'openai-compatible:x' });
      expect(failed.status).toBeGreaterThanOrEqual(400);
      await api.post(`/v1/sessions/${id}/inbox`, { name: 'abort', content: 'stop now' });
      expect((await api.post(`/v1/sessions/${id}/turns`, { input: 'third' })).status).toBe(409);
      const turns = (await api.get(`/v1/sessions/${id}/turns`)).body.turns;
      const stored = (await api.get(`/v1/sessions/${id}`)).body.counts.turns;
      expect(turns.map((turn: any) => turn.turn)).toEqual(Array.from({ length: stored }, (_, index) => stored - index));
      expect(turns[0]).toMatchObject({ status: 'aborted', error: { code: 'aborted' }, output: null, usage: null });
      const first = turns.at(-1);
      expect(first).toMatchObject({
        turn: 1,
        status: 'completed',
        notices: [expect.objectContaining({ name: '0001-note.md' })],
      });
      expect(first.context.notices_delivered).toEqual(['0001-note.md']);
      const aborted = await api.get(`/v1/sessions/${id}/turns/${turns[0].turn}`);
      expect(aborted.body.receipt).toMatchObject({ abort: { name: 'abort', reason: 'stop now' } });
      const detail = await api.get(`/v1/sessions/${id}/turns/1`);
      expect(detail.body.receipt.synthetic).toEqual([
        expect.objectContaining({ synthetic: 'inbox', name: '0001-note.md', chars: 'Budget left: 2 USD'.length }),
      ]);
    });

    it('answers the same once the records are packed into segments', async () => {
      const { id } = await toolSession(5);
      const before = await allTurns(id, 4);
      const detailBefore = (await api.get(`/v1/sessions/${id}/turns/7`)).body;
      const log = new SessionLog(harness.store, { keyPrefix: harness.keyPrefix });
      await log.pack(id);
      await log.pack(id);
      const listed = await harness.store.list(`${harness.keyPrefix}sessions/${id}/turn/`, { limit: 1000 });
      expect(listed.objects.some((object) => object.key.endsWith('.seg'))).toBe(true);
      expect(await allTurns(id, 4)).toEqual(before);
      expect(await allTurns(id, 100)).toEqual(before);
      expect((await api.get(`/v1/sessions/${id}/turns/7`)).body).toEqual(detailBefore);
      expect(
        (await api.get(`/v1/sessions/${id}/turns?before=4&limit=2`)).body.turns.map((turn: any) => turn.turn),
      ).toEqual([3, 2]);
    });

    it('refuses a turn that does not exist (404) and bad numbers (400)', async () => {
      const id = await api.session();
      await api.post(`/v1/sessions/${id}/turns`, { input: 'only' });
      expect((await api.get(`/v1/sessions/${id}/turns/2`)).status).toBe(404);
      expect((await api.get(`/v1/sessions/${id}/turns/0`)).status).toBe(400);
      expect((await api.get(`/v1/sessions/${id}/turns?limit=101`)).status).toBe(400);
      expect((await api.get(`/v1/sessions/${freshId('missing')}/turns`)).status).toBe(404);
      expect((await api.get(`/v1/sessions/${id}/turns`)).body).toMatchObject({
        has_more: false,
        next_before: null,
        turns: [{ turn: 1 }],
      });
    });
  });

  describe(`${label}: session listing`, () => {
    it('lists sessions newest first in pages, with creation time, metadata, counts and last activity', async () => {
      // A deployment prefix of its own: the listing sees only this test's sessions.
      const env = { KEY_PREFIX: `${freshId('listing')}/` };
      const call = async (method: string, path: string, body?: unknown) => {
        const response = await harness.fetchWithEnv(env, path, {
          method,
          headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
        const text = await response.text();
        return { status: response.status, body: text === '' ? null : JSON.parse(text) };
      };
      const ids = ['b-2', 'a_1', 'c', 'a-1', 'a'];
      for (const id of ids) {
        expect((await call('POST', '/v1/sessions', { id, metadata: { name: `session ${id}` } })).status).toBe(201);
        // A millisecond apart, so creation order alone decides the listing order.
        await new Promise((resolve) => setTimeout(resolve, 3));
      }
      expect((await call('POST', '/v1/sessions/c/turns', { input: 'hello' })).status).toBe(200);
      const listAll = async (query: string) => {
        const seen: any[] = [];
        let after: string | null = null;
        for (let pages = 0; pages < 10; pages++) {
          const page = await call('GET', `/v1/sessions?limit=2${query}${after ? `&after=${after}` : ''}`);
          expect(page.status, JSON.stringify(page.body)).toBe(200);
          expect(page.body.sessions.length).toBeLessThanOrEqual(2);
          seen.push(...page.body.sessions);
          if (!page.body.has_more) break;
          after = page.body.next_after;
        }
        return seen;
      };
      // The turn's row is written after its response, in the background: listed until it shows.
      let seen = await listAll('');
      while (seen.find((session) => session.id === 'c')?.counts.turns !== 1) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        seen = await listAll('');
      }
      // Newest created first.
      expect(seen.map((session) => session.id).sort()).toEqual([...ids].sort());
      const times = seen.map((session) => Date.parse(session.created_at));
      expect(times).toEqual([...times].sort((a, b) => b - a));
      expect(seen.at(-1).id).toBe('b-2');
      const c = seen.find((session) => session.id === 'c');
      expect(c).toMatchObject({
        metadata: { name: 'session c' },
        metadata_complete: true,
        counts: { items: 2, turns: 1, tool_calls: 0 },
      });
      expect(Date.parse(c.last_activity_at)).toBeGreaterThanOrEqual(Date.parse(c.created_at));
      // In the order GET /v1/sessions/{id} gives them.
      const single = (await call('GET', '/v1/sessions/c')).body;
      expect(Object.keys(single.counts)).toEqual(['items', 'turns', 'tool_calls']);
      expect(seen.map((session) => Object.keys(session.counts))).toEqual(seen.map(() => Object.keys(single.counts)));
      const a = seen.find((session) => session.id === 'a');
      expect(a).toMatchObject({ counts: { items: 0, turns: 0, tool_calls: 0 }, last_activity_at: a.created_at });
      const light = await call('GET', '/v1/sessions?counts=false&limit=100');
      expect(light.body.sessions.map((session: any) => [session.id, session.counts])).toEqual(
        seen.map((session) => [session.id, null]),
      );
      expect(light.body).toMatchObject({ has_more: false, next_after: null });
      // A deleted session leaves the listing.
      expect((await call('DELETE', '/v1/sessions/a-1')).status).toBe(204);
      const remaining = seen.map((session) => session.id).filter((id) => id !== 'a-1');
      expect((await call('GET', '/v1/sessions?limit=100')).body.sessions.map((session: any) => session.id)).toEqual(
        remaining,
      );
      // A session id as the cursor (as pages before the index returned) continues after that session.
      expect(
        (await call('GET', `/v1/sessions?after=${remaining[0]}&limit=100`)).body.sessions.map(
          (session: any) => session.id,
        ),
      ).toEqual(remaining.slice(1));
      expect((await call('GET', '/v1/sessions?after=a%2F')).status).toBe(400);
    });
  });
}
