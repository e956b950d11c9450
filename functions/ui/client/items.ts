/** An item's row: its seq, its treatment, its text, and for a compacted one the stored original. */
import { add, el } from './dom.ts';
import { itemText } from './format.ts';

export function itemRow(item: any): HTMLElement {
  const treatment = item.treatment ?? 'stored';
  const entry = el(
    'li',
    { class: `item treatment-${treatment}`, 'data-seq': String(item.seq) },
    el('span', { class: 'seq' }, `#${item.seq} ${treatment === 'stored' ? '' : treatment}`),
  );
  if (treatment !== 'compacted' || !item.compacted_as) {
    add(entry, el('pre', {}, itemText(item)));
    return entry;
  }
  const compactedText =
    item.type === 'function_call'
      ? `call ${item.name}(${item.compacted_as.arguments})`
      : `output ${item.call_id}: ${item.compacted_as.output}`;
  const stamp = /md5 ([0-9a-f]{5})/.exec(compactedText)?.[1];
  const shown = el('pre', { class: 'compacted-text' }, compactedText);
  const toggle = el(
    'button',
    { type: 'button', 'aria-pressed': 'false', class: 'toggle-original' },
    'Show stored original',
  );
  add(entry, el('span', { class: 'mark stamp' }, `stamp md5 ${stamp ?? '?'}`), toggle, shown);
  toggle.addEventListener('click', () => {
    const original = toggle.getAttribute('aria-pressed') !== 'true';
    toggle.setAttribute('aria-pressed', String(original));
    toggle.textContent = original ? 'Show what the model got' : 'Show stored original';
    shown.textContent = original ? itemText(item) : compactedText;
    shown.className = original ? 'original-text' : 'compacted-text';
  });
  return entry;
}
