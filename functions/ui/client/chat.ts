/** The chat box: a streamed turn (server-sent events read from fetch), its text as it comes. */
import { IMAGE_MEDIA_TYPES } from '../../../lib/media.ts';
import { authorization, sessionPath, sizeLimits, unauthorized } from './api.ts';
import { $, el } from './dom.ts';
import { counted } from './format.ts';
import { readEvents } from './sse.ts';

/** The chat box's view: counted up each time it is emptied for another session (or token). */
let view = 0;

/** The chat box's current view, to tell whether a turn's caller still shows it. */
export const chatView = (): number => view;

/** Empties the chat box for another view: a turn under way writes nothing more into it. */
export function clearChat(): void {
  view++;
  $('chat-output').replaceChildren();
  refuseImage('');
}

/** The image attached to the next turn (picked or pasted), and its preview's object URL. */
let attached: { file: File; url: string } | null = null;

/** The image the next turn sends, or null. */
export const attachedImage = (): File | null => attached?.file ?? null;

/** Attaches `file` (an image) to the next turn, in place of any before: its thumbnail, name and size, and Remove. */
function attach(file: File | null): void {
  if (attached) URL.revokeObjectURL(attached.url);
  attached = file ? { file, url: URL.createObjectURL(file) } : null;
  const remove = el('button', { type: 'button', class: 'remove-image' }, 'Remove');
  // The button goes with the image: the focus moves to the picker, not out of the form.
  remove.addEventListener('click', () => {
    attach(null);
    refuseImage('');
    $('chat-image').focus();
  });
  $('chat-attached').replaceChildren(
    ...(attached
      ? [
          el('img', { class: 'thumb', src: attached.url, alt: `${attached.file.name}, to be sent` }),
          `${attached.file.name} (${counted(attached.file.size, 'byte')}) `,
          remove,
        ]
      : []),
  );
  if (!file) $<HTMLInputElement>('chat-image').value = '';
}

/** Detaches the image once its turn was taken. */
export const detachImage = (): void => attach(null);

/** Says why an image was not attached (empty: says nothing). */
function refuseImage(reason: string): void {
  const line = $('chat-image-error');
  line.textContent = reason;
  line.hidden = reason === '';
}

/** The bytes of `text` as UTF-8, as a request sends it. */
const utf8Bytes = (text: string): number => new TextEncoder().encode(text).length;

/** A turn's request body: the input (docs/API.md, "Content parts"), streamed. */
const turnBody = (input: unknown): string => JSON.stringify({ input, stream: true });

/**
 * Why the API would refuse `file`, or '' when it takes it: a type other than PNG, JPEG, GIF or
 * WebP (lib/media.ts), or, once the session's read named the API's limits, an image over
 * MAX_IMAGE_BYTES or one whose turn alone (the image as base64, with no text) would be a body
 * over MAX_BODY_BYTES.
 */
function imageRefusal(file: File): string {
  const refused = (why: string) => `${file.name || 'The pasted image'} is not attached: it is ${why}.`;
  if (!(IMAGE_MEDIA_TYPES as readonly string[]).includes(file.type))
    return refused(`${file.type || 'of no known type'}, and the API takes PNG, JPEG, GIF or WebP images`);
  const limits = sizeLimits();
  if (!limits) return '';
  const size = counted(file.size, 'byte');
  if (file.size > limits.image)
    return refused(`${size}, and the API takes images of at most ${counted(limits.image, 'byte')} (MAX_IMAGE_BYTES)`);
  // The body around the image's data: URL, then its base64 (4 bytes for every 3, or fewer, of the image).
  const content = [{ type: 'input_image', image_url: `data:${file.type};base64,` }];
  const body = utf8Bytes(turnBody([{ type: 'message', role: 'user', content }])) + Math.ceil(file.size / 3) * 4;
  if (body <= limits.body) return '';
  const most = `${counted(limits.body, 'byte')} (MAX_BODY_BYTES)`;
  return refused(
    `${size}, sent as base64 in a request of ${counted(body, 'byte')}, and the API takes requests of at most ${most}`,
  );
}

/** Attaches `file` (picked or pasted) unless the API would refuse it: then it says why, and what was attached stays. */
function offer(file: File): void {
  const reason = imageRefusal(file);
  refuseImage(reason);
  if (reason === '') attach(file);
  else $<HTMLInputElement>('chat-image').value = '';
}

/** Wires the image picker and pasting an image into the input. */
export function wireImage(): void {
  const picker = $<HTMLInputElement>('chat-image');
  picker.addEventListener('change', () => {
    const file = picker.files?.[0];
    if (file) offer(file);
  });
  $('chat-input').addEventListener('paste', (event) => {
    // An image of a type the API takes, before one it would refuse (which is refused here, saying so).
    const images = [...(event.clipboardData?.files ?? [])].filter((file) => file.type.startsWith('image/'));
    const image = images.find((file) => (IMAGE_MEDIA_TYPES as readonly string[]).includes(file.type)) ?? images[0];
    // Any text pasted with it goes into the input as usual.
    if (image) offer(image);
  });
}

/**
 * Keeps `--chat-height` at the chat box's height: in one column, where the box stays at the
 * window's bottom, the page's scroll padding (styles.ts), so that a row scrolled into view
 * there shows above the box rather than under it.
 */
export function trackChatHeight(): void {
  const section = $('chat-section');
  const root = document.documentElement;
  new ResizeObserver(() => root.style.setProperty('--chat-height', `${section.offsetHeight}px`)).observe(section);
}

/** A file's bytes as a base64 `data:` URL. */
function dataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

/**
 * A turn's input: the text alone, or with an image one user message of an `input_text` part
 * (none for no text) and an `input_image` part (a base64 `data:` URL, docs/API.md "Content parts").
 */
async function turnInput(text: string, image: File | null): Promise<unknown> {
  if (!image) return text;
  const content = [
    ...(text.trim() ? [{ type: 'input_text', text }] : []),
    { type: 'input_image', image_url: await dataUrl(image) },
  ];
  return [{ type: 'message', role: 'user', content }];
}

/**
 * Takes a turn of `input` (and `image`, when one), its text shown while the chat box shows the
 * view it was sent from; returns whether the API took it (false: refused, or the connection
 * failed, and the box says so).
 */
export async function takeTurn(id: string, input: string, image: File | null = null): Promise<boolean> {
  const sentFrom = view;
  const write = (text: string, append = true) => {
    if (view !== sentFrom) return;
    const out = $('chat-output');
    out.textContent = append ? out.textContent + text : text;
  };
  write('', false);
  try {
    const body = turnBody(await turnInput(input, image));
    const limit = sizeLimits()?.body;
    const bytes = utf8Bytes(body);
    if (limit !== undefined && bytes > limit) {
      const most = counted(limit, 'byte');
      write(`Not sent: the request would be ${counted(bytes, 'byte')}, and the API takes requests of at most ${most}`);
      write(' (MAX_BODY_BYTES). A shorter input or a smaller image fits.');
      return false;
    }
    return await streamTurn(id, body, write);
  } catch (error) {
    // The network, before the answer or during it: whether the turn ran, the timeline tells.
    if (!(error instanceof TypeError)) throw error;
    if (view === sentFrom && $('chat-output').textContent) write('\n');
    write(`[no answer: the API could not be reached (${error.message}); the timeline shows whether the turn ran]`);
    return false;
  }
}

async function streamTurn(id: string, body: string, write: (text: string, append?: boolean) => void) {
  const response = await fetch(sessionPath(id, '/turns'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...authorization() },
    body,
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
