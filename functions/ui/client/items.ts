/** An item's row: its seq, its treatment, its text, and for a compacted one the stored original. */
import { add, el } from './dom.ts';
import { contentText, imagePruned, itemText } from './format.ts';
import { mediaRow } from './media.ts';

/** A text longer than this many lines shows its first ones, with a button for the rest. */
const COLLAPSED_LINES = 12;

function textBlock(text: string): HTMLElement {
  const lines = text.split('\n');
  const pre = el('pre', {}, text);
  if (lines.length <= COLLAPSED_LINES) return pre;
  const short = `${lines.slice(0, COLLAPSED_LINES).join('\n')}\n…`;
  pre.textContent = short;
  const toggle = el(
    'button',
    { type: 'button', class: 'toggle-collapse', 'aria-expanded': 'false' },
    `Show all ${lines.length} lines`,
  );
  toggle.addEventListener('click', () => {
    const expand = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(expand));
    toggle.textContent = expand ? `Show the first ${COLLAPSED_LINES} lines` : `Show all ${lines.length} lines`;
    pre.textContent = expand ? text : short;
  });
  return el('div', { class: 'collapsible' }, pre, toggle);
}

/** An item of session `id` (its blobs are read from there); in what the model saw, a pruned image is marked. */
export function itemRow(id: string, item: any): HTMLElement {
  const treatment = item.treatment ?? 'stored';
  const pruned = imagePruned(item.compacted_as);
  const entry = el(
    'li',
    { class: `item treatment-${treatment}${pruned ? ' image-pruned' : ''}`, 'data-seq': String(item.seq) },
    el('span', { class: 'seq' }, `#${item.seq} ${treatment === 'stored' ? '' : treatment}`),
    pruned ? el('span', { class: 'mark pruned-mark' }, 'image pruned: the model saw a placeholder ') : null,
  );
  if (treatment !== 'compacted' || !item.compacted_as) {
    add(entry, textBlock(itemText(item)), mediaRow(id, item));
    return entry;
  }
  const compactedText =
    item.type === 'function_call'
      ? `call ${item.name}(${item.compacted_as.arguments})`
      : `output ${item.call_id}: ${contentText(item.compacted_as.output)}`;
  const stamp = /md5 ([0-9a-f]{5})/.exec(compactedText)?.[1];
  const shown = el('pre', { class: 'compacted-text' }, compactedText);
  const toggle = el(
    'button',
    { type: 'button', 'aria-pressed': 'false', class: 'toggle-original' },
    'Show stored original',
  );
  add(entry, el('span', { class: 'mark stamp' }, `stamp md5 ${stamp ?? '?'}`), toggle, shown, mediaRow(id, item));
  toggle.addEventListener('click', () => {
    const original = toggle.getAttribute('aria-pressed') !== 'true';
    toggle.setAttribute('aria-pressed', String(original));
    toggle.textContent = original ? 'Show what the model got' : 'Show stored original';
    shown.textContent = original ? itemText(item) : compactedText;
    shown.className = original ? 'original-text' : 'compacted-text';
  });
  return entry;
}
