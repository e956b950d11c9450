/** Server-sent events read from a fetch response's body (fetch, not EventSource: the token is a header). */

/** Calls `onEvent` with each event's name, its JSON data and its number (the SSE `id`, null without one). */
export async function readEvents(
  body: NonNullable<Response['body']>,
  onEvent: (event: string, data: any, id: number | null) => void,
): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      const id = /^id: (\d+)$/m.exec(frame)?.[1];
      if (event && data !== undefined) onEvent(event, JSON.parse(data), id === undefined ? null : Number(id));
    }
  }
}
