/** The chat box: a streamed turn (server-sent events read from fetch), its text as it comes. */
import { authorization, sessionPath, unauthorized } from './api.ts';
import { $ } from './dom.ts';
import { readEvents } from './sse.ts';

/** The chat box's view: counted up each time it is emptied for another session (or token). */
let view = 0;

/** The chat box's current view, to tell whether a turn's caller still shows it. */
export const chatView = (): number => view;

/** Empties the chat box for another view: a turn under way writes nothing more into it. */
export function clearChat(): void {
  view++;
  $('chat-output').replaceChildren();
}

/**
 * Takes a turn of `input`, its text shown while the chat box shows the view it was sent from;
 * returns whether the API took it (false: refused, or the connection failed, and the box says so).
 */
export async function takeTurn(id: string, input: string): Promise<boolean> {
  const sentFrom = view;
  const write = (text: string, append = true) => {
    if (view !== sentFrom) return;
    const out = $('chat-output');
    out.textContent = append ? out.textContent + text : text;
  };
  write('', false);
  try {
    return await streamTurn(id, input, write);
  } catch (error) {
    // The network, before the answer or during it: whether the turn ran, the timeline tells.
    if (!(error instanceof TypeError)) throw error;
    if (view === sentFrom && $('chat-output').textContent) write('\n');
    write(`[no answer: the API could not be reached (${error.message}); the timeline shows whether the turn ran]`);
    return false;
  }
}

async function streamTurn(id: string, input: string, write: (text: string, append?: boolean) => void) {
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
    write(`Refused: ${body?.error?.code ?? response.status} ${body?.error?.message ?? ''}`, false);
    return false;
  }
  await readEvents(response.body, (event, data) => {
    if (event === 'output_text.delta') write(data.delta);
    else if (event === 'output_item.done' && data.item.type === 'function_call')
      write(`\ncall ${data.item.name}(${data.item.arguments})`);
    else if (event === 'turn.completed') write(`\n[turn ${data.turn} completed]`);
    else if (event === 'error') write(`\n[error ${data.error.code}: ${data.error.message}]`);
  });
  return true;
}
