import { describe, expect, it } from 'vitest';
import type { ModelStreamEvent } from '../../lib/models/model.ts';
import { StreamOrder } from '../../lib/models/stream-order.ts';

const call = (call_id: string, args: string) => ({
  type: 'function_call' as const,
  call_id,
  name: 'write',
  arguments: args,
});

describe('StreamOrder: a streamed answer has one open item at a time, in the order of the output', () => {
  it('text, then a call in pieces: the message ends as the call starts', () => {
    const order = new StreamOrder();
    const events: ModelStreamEvent[] = [
      ...order.text('Writing '),
      ...order.text('it.'),
      ...order.callStart('a', 'write'),
      ...order.argumentsDelta('a', '{"path":'),
      ...order.argumentsDelta('a', ' "x"}'),
      ...order.call(call('a', '{"path":"x"}')),
      ...order.end(),
    ];
    const message = { type: 'message', role: 'assistant', content: 'Writing it.' };
    // The call keeps the model's own text of its arguments, which the pieces make up.
    const written = call('a', '{"path": "x"}');
    expect(events).toEqual([
      { type: 'text_delta', delta: 'Writing ' },
      { type: 'text_delta', delta: 'it.' },
      { type: 'item_done', item: message },
      { type: 'call_start', call_id: 'a', name: 'write' },
      { type: 'arguments_delta', call_id: 'a', delta: '{"path":' },
      { type: 'arguments_delta', call_id: 'a', delta: ' "x"}' },
      { type: 'item_done', item: written },
    ]);
    expect(order.output).toEqual([message, written]);
  });

  it("holds a second call's pieces and text during a call until the call ends", () => {
    const order = new StreamOrder();
    const live = [
      ...order.callStart('a', 'write'),
      ...order.callStart('b', 'write'),
      ...order.argumentsDelta('b', '{"b":1}'),
      ...order.argumentsDelta('a', '{"a":'),
    ];
    expect(live).toEqual([
      { type: 'call_start', call_id: 'a', name: 'write' },
      { type: 'arguments_delta', call_id: 'a', delta: '{"a":' },
    ]);
    expect(order.call(call('b', '{"b":1}'))).toEqual([]);
    const rest = [...order.argumentsDelta('a', '1}'), ...order.call(call('a', '{"a":1}')), ...order.end()];
    expect(rest).toEqual([
      { type: 'arguments_delta', call_id: 'a', delta: '1}' },
      { type: 'item_done', item: call('a', '{"a":1}') },
      { type: 'call_start', call_id: 'b', name: 'write' },
      { type: 'arguments_delta', call_id: 'b', delta: '{"b":1}' },
      { type: 'item_done', item: call('b', '{"b":1}') },
    ]);
    expect(order.output).toEqual([call('a', '{"a":1}'), call('b', '{"b":1}')]);
  });

  it('a call without pieces comes whole, pieces that fall short get the rest, an unfinished call is left out', () => {
    const order = new StreamOrder();
    const events = [
      ...order.callStart('empty', 'write'),
      ...order.call(call('empty', '{}')),
      ...order.call(call('whole', '{"w":1}')),
      ...order.text('done'),
      ...order.callStart('cut', 'write'),
      ...order.argumentsDelta('cut', '{"c'),
      ...order.end(),
    ];
    expect(events.filter((event) => event.type !== 'text_delta')).toEqual([
      { type: 'call_start', call_id: 'empty', name: 'write' },
      { type: 'arguments_delta', call_id: 'empty', delta: '{}' },
      { type: 'item_done', item: call('empty', '{}') },
      { type: 'item_done', item: call('whole', '{"w":1}') },
      { type: 'item_done', item: { type: 'message', role: 'assistant', content: 'done' } },
      { type: 'call_start', call_id: 'cut', name: 'write' },
      { type: 'arguments_delta', call_id: 'cut', delta: '{"c' },
    ]);
    expect(order.output.map((item) => (item.type === 'function_call' ? item.call_id : 'message'))).toEqual([
      'empty',
      'whole',
      'message',
    ]);
  });

  it('a reasoning block in its place, then on the next item to end; one during a call waits for the call', () => {
    const order = new StreamOrder();
    const thought = (text: string) => ({
      type: 'reasoning' as const,
      summary: [{ type: 'summary_text' as const, text }],
    });
    const events: ModelStreamEvent[] = [
      ...order.reasoning(thought('first')),
      ...order.callStart('a', 'write'),
      ...order.reasoning(thought('during a')),
      ...order.argumentsDelta('a', '{}'),
      ...order.call(call('a', '{}')),
      ...order.text('Done.'),
      ...order.end(),
    ];
    const withFirst = { ...call('a', '{}'), reasoning: [thought('first')] };
    const message = { type: 'message', role: 'assistant', content: 'Done.', reasoning: [thought('during a')] };
    expect(events).toEqual([
      { type: 'reasoning_done', item: thought('first') },
      { type: 'call_start', call_id: 'a', name: 'write' },
      { type: 'arguments_delta', call_id: 'a', delta: '{}' },
      { type: 'item_done', item: withFirst },
      { type: 'reasoning_done', item: thought('during a') },
      { type: 'text_delta', delta: 'Done.' },
      { type: 'item_done', item: message },
    ]);
    expect(order.output).toEqual([withFirst, message]);
  });

  it('reasoning goes on the item after it, or with nothing after it on an empty message ending the output', () => {
    const order = new StreamOrder();
    const first = { type: 'reasoning' as const, summary: [{ type: 'summary_text' as const, text: 'a' }] };
    const last = { type: 'reasoning' as const, summary: [{ type: 'summary_text' as const, text: 'b' }] };
    const events = [
      ...order.reasoning(first),
      ...order.text(''),
      ...order.call(call('a', '{}')),
      ...order.reasoning(last),
      ...order.callStart('cut', 'write'),
      ...order.end(),
    ];
    const closing = { type: 'message', role: 'assistant', content: '', reasoning: [last] };
    expect(events).toEqual([
      { type: 'reasoning_done', item: first },
      { type: 'item_done', item: { ...call('a', '{}'), reasoning: [first] } },
      { type: 'reasoning_done', item: last },
      { type: 'call_start', call_id: 'cut', name: 'write' },
      { type: 'item_done', item: closing },
    ]);
    expect(order.output).toEqual([{ ...call('a', '{}'), reasoning: [first] }, closing]);
  });
});
