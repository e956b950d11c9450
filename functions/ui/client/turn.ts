/** An expanded turn: its times, its input and output, and what the model saw (its receipt). */
import { api, sessionPath } from './api.ts';
import { add, el, timeAgo } from './dom.ts';
import { counted, durationText } from './format.ts';
import { itemRow } from './items.ts';
import { forkButton } from './lineage.ts';
import { onScrollEnd } from './paging.ts';
import { keepLoader } from './view.ts';

const tokens = (count: number, kind: string) => counted(count, `${kind} token`);

export async function expandTurn(id: string, turn: any, details: HTMLElement): Promise<void> {
  const detail = await api(sessionPath(id, `/turns/${turn.turn}`));
  const body = el('div', { class: 'turn-body' });
  add(details, body);
  const started = turn.started_at ? timeAgo(turn.started_at) : '?';
  const took =
    turn.started_at && turn.completed_at
      ? `took ${durationText(Date.parse(turn.completed_at) - Date.parse(turn.started_at))}`
      : 'running';
  add(
    body,
    el(
      'p',
      { class: 'muted turn-times' },
      'started ',
      started,
      // A turn closed before its receipt was stored names no strategies.
      ` · ${took}${turn.strategies.length > 0 ? ` · strategies ${turn.strategies.join(', ')}` : ''}` +
        (turn.usage
          ? ` · ${tokens(turn.usage.input_tokens, 'input')}, ${tokens(turn.usage.output_tokens, 'output')}`
          : ''),
    ),
  );
  add(body, forkButton(id, turn.turn));
  if (turn.error) add(body, el('p', { class: 'error' }, `${turn.error.code}: ${turn.error.message}`));
  // Input and output: stored items by seq range.
  for (const [label, range] of [
    ['Input', turn.input],
    ['Output', turn.output],
  ] as const) {
    const section = el('section', { class: `turn-${label.toLowerCase()}` }, el('h4', {}, label));
    if (range) {
      const items = el('ol', { class: 'items' });
      for (const item of await itemsIn(id, range)) add(items, itemRow(id, item));
      add(section, items);
    } else add(section, el('p', { class: 'muted' }, 'none'));
    add(body, section);
  }
  const seen = el('section', { class: 'turn-seen' }, el('h4', {}, 'What the model saw'));
  add(body, seen);
  await renderSeen(id, turn, detail.receipt, seen);
}

/** The stored items of a seq range, oldest first: pages of at most 1,000, newest first, until its first seq. */
async function itemsIn(id: string, range: { first_seq: number; last_seq: number }): Promise<any[]> {
  const items: any[] = [];
  for (let before = range.last_seq + 1; before > range.first_seq; ) {
    const limit = Math.min(1000, before - range.first_seq);
    const page = await api(sessionPath(id, `/items?before=${before}&limit=${limit}`));
    items.push(...page.items.filter((item: any) => item.seq >= range.first_seq));
    if (!page.has_more || page.next_before === null || page.items.length === 0) break;
    before = page.next_before;
  }
  return items.reverse();
}

async function renderSeen(id: string, turn: any, receipt: any, seen: HTMLElement): Promise<void> {
  if (!receipt) {
    add(seen, el('p', { class: 'muted' }, 'No receipt: the turn ended without storing what its model saw.'));
    return;
  }
  if (receipt.abort)
    add(
      seen,
      el('p', { class: 'mark error-mark' }, `Aborted by notice ${receipt.abort.name}: ${receipt.abort.reason}`),
    );
  const synthetic = el('ul', { class: 'synthetic' });
  for (const entry of receipt.synthetic) {
    const text =
      entry.synthetic === 'context_notice'
        ? `Context notice (position ${entry.index}): ${entry.content ?? ''}`
        : entry.synthetic === 'inbox'
          ? `Inbox notice ${entry.name ?? ''} (position ${entry.index}, ${counted(entry.chars, 'char')})`
          : `Summary (position ${entry.index}, ${counted(entry.chars, 'char')})`;
    add(synthetic, el('li', { class: `mark synthetic-${entry.synthetic}` }, text));
  }
  if (receipt.synthetic.length > 0) add(seen, synthetic);
  const runs = receipt.seen.map(
    (run: any) =>
      `${run.first_seq === run.last_seq ? run.first_seq : `${run.first_seq}-${run.last_seq}`} ${run.treatment}`,
  );
  add(seen, el('p', { class: 'muted runs' }, `Seqs: ${runs.join(', ')}`));
  const items = el('ol', { class: 'items' });
  const sentinel = el('p', { class: 'muted' }, 'Loading…');
  add(seen, items, sentinel);
  let before: number | null = null;
  const loadItems = async () => {
    const page = await api(sessionPath(id, `/turns/${turn.turn}/items?limit=50${before ? `&before=${before}` : ''}`));
    for (const item of page.items) add(items, itemRow(id, item));
    before = page.next_before;
    sentinel.textContent = page.has_more ? 'Scroll for older items…' : 'Start of the history.';
    return page.has_more as boolean;
  };
  // The newest page at once; older ones as the list's end scrolls into view.
  if (await loadItems()) keepLoader(onScrollEnd(sentinel, loadItems, () => 'Older items'));
}
