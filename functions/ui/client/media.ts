/**
 * An item's images and files: a stored image as a thumbnail (its blob fetched with the token,
 * shown from an object URL), an https image as a link (tailgate never fetches it), a file by
 * name, type and size.
 */
import { authorization, sessionPath } from './api.ts';
import { el } from './dom.ts';
import { sizeText } from './format.ts';

/** The media of a message or an output, or null when it has none. */
export function mediaRow(id: string, item: any): HTMLElement | null {
  const content = item.type === 'message' ? item.content : item.output;
  const parts = Array.isArray(content) ? content.filter((part) => part.type !== 'input_text') : [];
  if (parts.length === 0) return null;
  return el('div', { class: 'media' }, ...parts.map((part) => mediaPart(id, part)));
}

/** A link to `url` when it is an https:// URL (what the service stores), else its text alone. */
function linkTo(url: unknown, attributes: Record<string, string>, text: string): HTMLElement {
  if (typeof url === 'string' && url.startsWith('https://'))
    return el('a', { ...attributes, href: url, rel: 'noreferrer' }, text);
  return el('span', attributes, text);
}

function mediaPart(id: string, part: any): HTMLElement {
  if (part.type === 'input_file') {
    if (!part.blob) return linkTo(part.file_url, { class: 'file' }, `file ${part.file_url}`);
    return el('span', { class: 'file' }, `file ${part.filename ?? ''} · ${part.media_type} · ${sizeText(part.bytes)}`);
  }
  if (!part.blob) return linkTo(part.image_url, { class: 'image-link' }, String(part.image_url));
  const size = part.width && part.height ? ` ${part.width}x${part.height}` : '';
  const label = `${part.media_type}${size}, ${sizeText(part.bytes)}`;
  const image = el('img', { class: 'thumb', alt: `image ${label}` });
  void blobUrl(id, part.blob).then(
    (url) => {
      image.addEventListener('load', () => URL.revokeObjectURL(url), { once: true });
      image.setAttribute('src', url);
    },
    () => image.setAttribute('alt', `image ${label} (not loaded)`),
  );
  return el('figure', { class: 'image' }, image, el('figcaption', {}, label));
}

/** An object URL of a session's blob, fetched with the bearer header. */
async function blobUrl(id: string, blob: string): Promise<string> {
  const response = await fetch(sessionPath(id, `/blobs/${blob}`), { headers: authorization() });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return URL.createObjectURL(await response.blob());
}
