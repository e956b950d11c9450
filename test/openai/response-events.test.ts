import type { ResponseStreamEvent } from 'openai/resources/responses/responses';
import { describe, expect, it } from 'vitest';
import { ResponseEventWriter } from '../../lib/openai/response-events.ts';
import type { TailgateResponse } from '../../lib/openai/responses.ts';
import { specProblems, streamingEventSchema } from '../support/open-responses-spec.ts';

const response = (status: 'completed' | 'failed') =>
  ({ id: 'resp_1', status, output: [] }) as unknown as TailgateResponse;

/** A writer whose item ids are `<type>_<index>`, and the events it sent. */
function writer() {
  const events: ResponseStreamEvent[] = [];
  return {
    events,
    writer: new ResponseEventWriter(
      (index, item) => `${item.type}_${index}`,
      (e) => events.push(e),
    ),
  };
}

describe('ResponseEventWriter: a call whose arguments stream', () => {
  it('a call the stream began and never ended is done, incomplete with its arguments so far, before the end', () => {
    for (const end of ['failed', 'completed'] as const) {
      const { events, writer: written } = writer();
      written.callStarted('call_1', 'write');
      written.argumentsDelta('call_1', '{"path":');
      // A piece of a call that is not the open one is no piece of it.
      written.argumentsDelta('call_2', '"x"');
      if (end === 'failed') written.failed(response('failed'));
      else written.completed(response('completed'));
      expect(events.map((event) => event.type)).toEqual([
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.output_item.done',
        `response.${end}`,
      ]);
      const item = { type: 'function_call', id: 'function_call_0', call_id: 'call_1', name: 'write' };
      expect(events[0]).toMatchObject({ output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } });
      expect(events[2]).toMatchObject({
        output_index: 0,
        item: { ...item, arguments: '{"path":', status: 'incomplete' },
      });
      for (const event of events.slice(0, 3)) expect(specProblems(streamingEventSchema, event)).toEqual([]);
    }
  });

  it('text after a call is the next output item', () => {
    const { events, writer: written } = writer();
    written.callStarted('call_1', 'write');
    written.argumentsDelta('call_1', '{}');
    written.itemDone({ type: 'function_call', call_id: 'call_1', name: 'write', arguments: '{}' });
    written.delta('done');
    written.itemDone({ type: 'message', role: 'assistant', content: 'done' });
    const added = events.filter((event) => event.type === 'response.output_item.added');
    expect(added.map((event) => [event.output_index, event.item.id])).toEqual([
      [0, 'function_call_0'],
      [1, 'message_1'],
    ]);
  });
});

describe('ResponseEventWriter: a message the model ended', () => {
  it('is done once what follows it begins, or as the response has it when it ends the output', () => {
    const { events, writer: written } = writer();
    written.delta('Let me look.');
    written.itemDone({ type: 'message', role: 'assistant', content: 'Let me look.' });
    written.reasoningDone({ type: 'reasoning', summary: [{ type: 'summary_text', text: 'thinking' }] });
    written.delta('It is');
    written.itemDone({ type: 'message', role: 'assistant', content: 'It is' });
    const cut = {
      ...response('completed'),
      status: 'incomplete',
      output: [{ type: 'message', id: 'message_1', status: 'incomplete' }],
    };
    written.completed(cut as TailgateResponse);
    const status = (item: object) => (item as { status?: string }).status;
    const items = events.flatMap((event) =>
      event.type === 'response.output_item.added' || event.type === 'response.output_item.done'
        ? [`${event.type.slice(21)} ${event.output_index} ${event.item.id} ${status(event.item)}`]
        : [],
    );
    expect(items).toEqual([
      'added 0 message_0 in_progress',
      'done 0 message_0 completed',
      'added 1 reasoning_1_1 in_progress',
      'done 1 reasoning_1_1 completed',
      'added 2 message_1 in_progress',
      'done 2 message_1 incomplete',
    ]);
    expect(events.at(-1)!.type).toBe('response.incomplete');
  });
});

describe('ResponseEventWriter: a later run of the turn', () => {
  it('first does every item the earlier run added and did not do, incomplete; its own start from index 0', () => {
    for (const cut of ['message', 'call'] as const) {
      const { events, writer: written } = writer();
      written.delta('Let me');
      if (cut === 'call') {
        written.itemDone({ type: 'message', role: 'assistant', content: 'Let me' });
        written.callStarted('call_1', 'write');
        written.argumentsDelta('call_1', '{"path":');
      }
      written.restart();
      written.delta('Again');
      const done = events.filter((event) => event.type === 'response.output_item.done');
      const last = cut === 'call' ? { id: 'function_call_1', arguments: '{"path":' } : { id: 'message_0' };
      expect(done.at(-1)).toMatchObject({ item: { ...last, status: 'incomplete' } });
      expect(events.at(-1)).toMatchObject({
        type: 'response.output_text.delta',
        output_index: 0,
        item_id: 'message_0',
      });
      for (const event of events) expect(specProblems(streamingEventSchema, event)).toEqual([]);
    }
  });
});
