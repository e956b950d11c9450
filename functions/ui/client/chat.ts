/** The chat box: a streamed turn (server-sent events read from fetch), its text as it comes. */
import { authorization, sessionPath, unauthorized } from './api.ts';
import { $ } from './dom.ts';
import { readEvents } from './sse.ts';

/** Takes a turn of `input`; returns whether the API took it (false: refused, and why shows). */
export async function takeTurn(id: string, input: string): Promise<boolean> {
  const out = $('chat-output');
  out.textContent = '';
  const response = await fetch(sessionPath(id, '/turns'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...authorization() },
    body: JSON.stringify({ input, stream: true }),
  });
  if (response.status === 401) {
    unauthorized();
    return false;
  }
  if (!response.ok || !response.body) {
    const body: any = await response.json().catch(() => null);
    out.textContent = `Refused: ${body?.error?.code ?? response.status} ${body?.error?.message ?? ''}`;
    return false;
  }
  await readEvents(response.body, (event, data) => {
    if (event === 'output_text.delta') out.textContent += data.delta;
    else if (event === 'output_item.done' && data.item.type === 'function_call')
      out.textContent += `\ncall ${data.item.name}(${data.item.arguments})`;
    else if (event === 'turn.completed') out.textContent += `\n[turn ${data.turn} completed]`;
    else if (event === 'error') out.textContent += `\n[error ${data.error.code}: ${data.error.message}]`;
  });
  return true;
}
