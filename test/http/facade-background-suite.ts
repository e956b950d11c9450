import type OpenAI from 'openai';
import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { facadeClient, type HttpHarness } from './http-suite.ts';

/**
 * Background responses of the OpenAI facade through the official `openai` client, its fetch the
 * harness's: inside workerd (test/workers/http-turns.test.ts) the turn goes through the Cloudflare
 * Queues consumer and its events are replayed from the R2 journal. Node runs the same client
 * against a slow provider in test/openai/background-client.test.ts.
 */
export function defineFacadeBackgroundSuite(label: string, harness: HttpHarness): void {
  const client = facadeClient(harness);
  const input = Array.from({ length: 30 }, (_, index) => `w${index}`).join(' ');

  async function readEvents(id: string, after?: number): Promise<ResponseStreamEvent[]> {
    const stream = await client.responses.retrieve(id, {
      stream: true,
      ...(after === undefined ? {} : { starting_after: after }),
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    return events;
  }

  describe(`${label}: background responses (openai client)`, () => {
    it('runs a background response to completed, and replays its events from several points', async () => {
      const created = await client.responses.create({ model: 'echo', input, background: true });
      expect(created).toMatchObject({ status: 'queued', background: true, output: [] });
      let response = created;
      for (let polls = 0; polls < 600 && ['queued', 'in_progress'].includes(response.status!); polls++) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        response = await client.responses.retrieve(created.id);
      }
      expect(response).toMatchObject({ id: created.id, status: 'completed', output_text: `echo: ${input}` });
      const whole = await readEvents(created.id);
      expect(whole.map((event) => event.sequence_number)).toEqual(whole.map((_, index) => index));
      expect(whole.at(-1)).toMatchObject({ type: 'response.completed', response: { output_text: `echo: ${input}` } });
      for (const after of [0, 3, whole.length - 2]) {
        const resumed = await readEvents(created.id, after);
        expect(resumed).toEqual(
          whole
            .slice(after + 1)
            .map((event) => (event.type === 'response.completed' ? { ...event, response: expect.any(Object) } : event)),
        );
      }
      // Ended: a cancel answers it as it stands.
      expect((await client.responses.cancel(created.id)).status).toBe('completed');
    });

    it('a background response that compacted is continued from its compaction item, as a foreground one', async () => {
      const context_management = [{ type: 'compaction' as const, compact_threshold: 60 }];
      const first = await client.responses.create({ model: 'echo', input, context_management });
      const created = await client.responses.create({
        model: 'echo',
        previous_response_id: first.id,
        input,
        context_management,
        background: true,
      });
      // Its runner indexed the compaction before its end was journaled.
      const ended = (await readEvents(created.id)).at(-1);
      expect(ended?.type).toBe('response.completed');
      const output = ended?.type === 'response.completed' ? ended.response.output : [];
      const compaction = output.at(-1)!;
      expect(compaction.type).toBe('compaction');
      const next = await client.responses.create({
        model: 'echo',
        input: [compaction as OpenAI.Responses.ResponseInputItem, { role: 'user', content: 'go on' }],
      });
      expect(next.conversation!.id).toBe(first.conversation!.id);
    });
  });
}
