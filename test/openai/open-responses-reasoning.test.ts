import { describe, expect, it } from 'vitest';
import { responseSchema, specProblems, streamingEventSchema } from '../support/open-responses-spec.ts';
import { recordedThinking, recordedTool } from '../support/fake-providers/thinking.ts';
import { clientOnThinkingAnthropic, TOKEN } from './server.ts';

// A streamed tool loop that thinks, checked against the Open Responses specification event by
// event (test/support/open-responses-spec.ts), and for what ties the events together: numbered
// from 0, every delta and part event naming the item its output_index added, every item added
// done once under the same index and id, and response.completed holding those items, with usage.

const world = clientOnThinkingAnthropic();
const request = { model: 'claude-wire', tools: [recordedTool], reasoning: { effort: 'medium' }, stream: true };

async function stream(body: Record<string, unknown>): Promise<any[]> {
  const response = await fetch(`${world.tailgate.baseURL}/responses`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...request, ...body }),
  });
  expect(response.status).toBe(200);
  const events = (await response.text())
    .split('\n\n')
    .filter((block) => block.includes('data: ') && block !== 'data: [DONE]')
    .map((block) => JSON.parse(/^data: (.+)$/m.exec(block)![1]!));
  for (const event of events) expect(specProblems(streamingEventSchema, event), event.type).toEqual([]);
  expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
  return events;
}

/** The items the events added and did, by output index, checking that each event names the item at its index. */
function itemsOf(events: any[]): any[] {
  const added: any[] = [];
  const done: any[] = [];
  for (const event of events) {
    if (event.type === 'response.output_item.added') {
      expect(added[event.output_index], 'one item added per index').toBeUndefined();
      expect(event.output_index).toBe(added.length);
      added[event.output_index] = event.item;
    } else if (event.type === 'response.output_item.done') {
      expect(event.item.id).toBe(added[event.output_index]?.id);
      expect(done[event.output_index], 'one done per index').toBeUndefined();
      done[event.output_index] = event.item;
    } else if ('item_id' in event) {
      expect(event.item_id, event.type).toBe(added[event.output_index]?.id);
      expect(done[event.output_index], `${event.type} before its item is done`).toBeUndefined();
    }
  }
  expect(done.length).toBe(added.length);
  return done;
}

describe('Open Responses: a streamed tool loop that thinks', () => {
  for (const store of [true, false]) {
    it(`every event conforms and names its item; the end holds the items and usage (store: ${store})`, async () => {
      const include = store ? [] : ['reasoning.encrypted_content'];
      const first = await stream({ store, include, input: 'Weather in Paris?' });
      const items = itemsOf(first);
      expect(items.map((item) => item.type)).toEqual(['reasoning', 'function_call']);
      expect(items[0].summary).toEqual([{ type: 'summary_text', text: recordedThinking.thinking }]);
      expect(items[0].id).toMatch(/^rs_/);
      expect('encrypted_content' in items[0]).toBe(!store);
      const summary = first.filter((event) => event.type.startsWith('response.reasoning_summary'));
      expect(summary.map((event) => [event.type, event.summary_index])).toEqual([
        ['response.reasoning_summary_part.added', 0],
        ['response.reasoning_summary_text.delta', 0],
        ['response.reasoning_summary_text.done', 0],
        ['response.reasoning_summary_part.done', 0],
      ]);
      const completed = first.at(-1);
      expect(completed.type).toBe('response.completed');
      expect(specProblems(responseSchema, completed.response)).toEqual([]);
      expect(completed.response.output).toEqual(items);
      expect(completed.response.usage.output_tokens).toBeGreaterThan(0);

      // The next step sends the loop back (the reasoning with its payload, when not stored).
      const next = store
        ? { previous_response_id: completed.response.id, input: [] as unknown[] }
        : { input: [{ role: 'user', content: 'Weather in Paris?' }, ...items] };
      const output = { type: 'function_call_output', call_id: recordedThinking.callId, output: '18C, sunny' };
      const second = await stream({ store, include, ...next, input: [...next.input, output] });
      const answer = itemsOf(second);
      expect(answer.map((item) => item.type)).toEqual(['message']);
      expect(second.filter((event) => event.type === 'response.output_text.delta').length).toBeGreaterThan(0);
      expect(second.at(-1).response.output).toEqual(answer);
      expect(second.at(-1).response.usage.input_tokens).toBeGreaterThan(0);
      // The provider got the thinking back either way.
      const sent = world.provider.requests.at(-1)!.body.messages as { role: string; content: { type: string }[] }[];
      expect(sent.find((message) => message.role === 'assistant')!.content[0]!.type).toBe('thinking');
    });
  }
});
