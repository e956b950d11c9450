/**
 * A session's turns, newest first, a page at a time, with the charts of the turns loaded: drawn
 * again with each page, and with a followed turn's receipt once it ended.
 */
import { api, PAGE, sessionPath } from './api.ts';
import { renderCostChart, renderPromptChart } from './chart.ts';
import { $, el } from './dom.ts';
import { turnSummary } from './format.ts';
import { paged } from './paging.ts';
import { followTurn, isOpen } from './live.ts';
import { refreshQueue } from './queue.ts';
import { expandTurn } from './turn.ts';
import { report } from './view.ts';

export function loadTimeline(id: string): void {
  const loaded: any[] = [];
  const charts = () => {
    renderPromptChart(loaded);
    renderCostChart(loaded);
  };
  renderPromptChart(loaded);
  // A followed turn that ended: its receipt (its prompt size, usage and cost) in place of the one it was loaded with.
  const ended = (turn: any) => {
    const at = loaded.findIndex((known) => known.turn === turn.turn);
    if (at < 0) return;
    loaded[at] = turn;
    charts();
  };
  paged($('timeline'), $('timeline-more'), 'turns', async (before) => {
    const page = await api(sessionPath(id, `/turns?limit=${PAGE}${before ? `&before=${before}` : ''}`));
    loaded.push(...page.turns);
    charts();
    return {
      rows: page.turns.map((turn: any) => turnEntry(id, turn, ended)),
      next: page.has_more ? String(page.next_before) : null,
    };
  });
}

/**
 * A turn's entry in the list; a queued or running one is followed live, and redrawn once it
 * ended (`ended` gets its receipt then).
 */
function turnEntry(id: string, turn: any, ended: (turn: any) => void): HTMLElement {
  const entry = el('li', {}, turnRow(id, turn));
  if (isOpen(turn))
    followTurn(id, turn, entry, (now) => {
      entry.replaceChildren(turnRow(id, now));
      ended(now);
      void refreshQueue(id).catch(report);
    });
  return entry;
}

/** A turn's row: its summary line, expanded (and loaded) on the first open. */
function turnRow(id: string, turn: any): HTMLElement {
  const details = el('details', { class: `turn status-${turn.status}`, 'data-turn': String(turn.turn) });
  // An aborted turn's receipt ends with its `abort` notice, which the summary names already.
  const abort = turn.status === 'aborted' ? turn.error?.details?.stored_as : undefined;
  const notices = turn.notices.filter((notice: any) => notice.stored_as !== abort).length;
  details.appendChild(
    el(
      'summary',
      {},
      turnSummary(turn),
      notices > 0 ? el('span', { class: 'mark inbox-mark' }, ` ${notices} notice(s)`) : null,
      turn.error && turn.status !== 'aborted' ? el('span', { class: 'mark error-mark' }, ` ${turn.error.code}`) : null,
    ),
  );
  let loaded = false;
  details.addEventListener('toggle', () => {
    if (!details.hasAttribute('open') || loaded) return;
    loaded = true;
    void expandTurn(id, turn, details).catch(report);
  });
  return details;
}
