/**
 * The Messages API stream of a recorded non-streamed answer (its JSON): the events Anthropic
 * sends for the same message (`message_start`, each block's start, deltas and stop, then
 * `message_delta` and `message_stop`), each text, thinking and tool input in two pieces. So one
 * recorded answer serves a streamed call and a generated one alike.
 */
export function anthropicStreamOf(json: string): string {
  const { content, stop_reason, stop_sequence, usage, ...message } = JSON.parse(json);
  const events: [string, unknown][] = [
    [
      'message_start',
      { type: 'message_start', message: { ...message, content: [], usage: { ...usage, output_tokens: 1 } } },
    ],
  ];
  for (const [index, block] of (content as any[]).entries()) {
    const delta = (piece: object) =>
      events.push(['content_block_delta', { type: 'content_block_delta', index, delta: piece }]);
    if (block.type === 'thinking') {
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } },
      ]);
      for (const thinking of halves(block.thinking)) delta({ type: 'thinking_delta', thinking });
      delta({ type: 'signature_delta', signature: block.signature });
    } else if (block.type === 'text') {
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
      ]);
      for (const text of halves(block.text)) delta({ type: 'text_delta', text });
    } else if (block.type === 'tool_use') {
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { ...block, input: {} } },
      ]);
      for (const partial_json of halves(JSON.stringify(block.input))) delta({ type: 'input_json_delta', partial_json });
    } else {
      // redacted_thinking: whole in its start.
      events.push(['content_block_start', { type: 'content_block_start', index, content_block: block }]);
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  }
  events.push(
    [
      'message_delta',
      { type: 'message_delta', delta: { stop_reason, stop_sequence }, usage: { output_tokens: usage.output_tokens } },
    ],
    ['message_stop', { type: 'message_stop' }],
  );
  return events.map(([name, data]) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`).join('');
}

function halves(text: string): string[] {
  const middle = Math.ceil(text.length / 2);
  return [text.slice(0, middle), text.slice(middle)].filter((piece) => piece !== '');
}
