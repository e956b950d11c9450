/**
 * A session's turns, newest first, a page at a time, with the charts of the turns loaded: drawn
 * again with each page, with a followed turn's receipt once it ended, and with the turns the
 * live updates bring (`newer`).
 */
import { api, PAGE, sessionPath } from './api.ts';
import { renderCostChart, renderPromptChart } from './chart.ts';
import { $, el, prepend } from './dom.ts';
import { counted, turnSummary } from './format.ts';
import { paged, recount } from './paging.ts';
import { followTurn, isOpen } from './live.ts';
import { refreshQueue } from './queue.ts';
import { expandTurn } from './turn.ts';
import { report, Unauthorized } from './view.ts';

/** What the live updates ask of the timeline. */
export interface Timeline {
  /** Whether its first page is shown: before, the updates leave it alone. */
  ready(): boolean;
  /**
   * Brings the list to the session's `total` turns: rows past it go (a deleted newest turn),
   * the newer turns are read (one page, more only when over 100 came) and shown on top, and a
   * shown turn that is not followed is redrawn when it changed. Returns whether a turn came.
   */
  newer(total: number, signal: AbortSignal): Promise<boolean>;
}

interface Shown {
  entry: HTMLElement;
  turn: any;
  /** A followed turn's end (live.ts `followTurn`), given the turn once read ended. */
  end?: (turn: any) => void;
}

/** `forkSeq`: a fork's `forked_from.seq`: the turns up to it ran in its parent (its usage leaves them out). */
export function loadTimeline(id: string, forkSeq: number | null = null): Timeline {
  const list = $('timeline');
  /** The turns shown, newest first (the charts' bars), and their entries by number. */
  let loaded: any[] = [];
  const shown = new Map<number, Shown>();
  let ready = false;
  const charts = () => {
    renderPromptChart(loaded);
    renderCostChart(loaded);
  };
  renderPromptChart(loaded);
  // A followed turn that ended: its receipt (its prompt size, usage and cost) in place of the one it was loaded with.
  const ended = (turn: any) => {
    const known = shown.get(turn.turn);
    if (known) known.turn = turn;
    const at = loaded.findIndex((other) => other.turn === turn.turn);
    if (at < 0) return;
    loaded[at] = turn;
    charts();
  };
  const entryOf = (turn: any) => {
    const { entry, end } = turnEntry(id, turn, ended, forkSeq);
    shown.set(turn.turn, { entry, turn, ...(end ? { end } : {}) });
    return entry;
  };
  paged(
    list,
    $('timeline-more'),
    'turn',
    async (before) => {
      const page = await api(sessionPath(id, `/turns?limit=${PAGE}${before ? `&before=${before}` : ''}`));
      return { records: page.turns as any[], next: page.has_more ? String(page.next_before) : null };
    },
    // Only a page arriving while this session's view shows: its turns are charted and followed.
    (records) => {
      const turns = records.filter((turn) => !shown.has(turn.turn));
      loaded.push(...turns);
      charts();
      ready = true;
      return turns.map(entryOf);
    },
  );
  return {
    ready: () => ready,
    async newer(total, signal) {
      const newest = Math.max(0, ...shown.keys());
      const fetched: any[] = [];
      for (let before: number | null = null; ; ) {
        const limit = Math.min(100, Math.max(1, (before ?? total + 1) - Math.min(newest, total)));
        const page = await api(sessionPath(id, `/turns?limit=${limit}${before ? `&before=${before}` : ''}`), {
          signal,
        });
        fetched.push(...page.turns);
        if (!page.has_more || page.turns.length === 0 || page.turns.at(-1).turn <= newest) break;
        before = page.next_before;
      }
      return keepingScroll(list, () => {
        let changed = false;
        for (const [number, { entry }] of shown)
          if (number > total) {
            entry.remove();
            shown.delete(number);
            changed = true;
          }
        const added: HTMLElement[] = [];
        for (const turn of fetched) {
          const known = shown.get(turn.turn);
          if (!known) {
            if (turn.turn > newest) added.push(entryOf(turn));
            continue;
          }
          // A followed turn redraws itself once it ended; one read ended here ends it (its
          // follower may have lost the API meanwhile).
          if (isOpen(known.turn)) {
            if (!isOpen(turn)) known.end?.(turn);
            continue;
          }
          if (sameTurn(known.turn, turn)) continue;
          const entry = entryOf(turn);
          // The same turn (not one numbered again after a delete) stays expanded when it was.
          if (known.turn.started_at === turn.started_at && known.entry.querySelector('details')?.open)
            entry.querySelector('details')?.setAttribute('open', '');
          known.entry.replaceWith(entry);
          changed = true;
        }
        prepend(list, ...added);
        if (added.length === 0 && !changed) return false;
        loaded = [...shown.values()].map((known) => known.turn).sort((a, b) => b.turn - a.turn);
        charts();
        recount(list, $('timeline-more'), 'turn');
        return added.length > 0;
      });
    },
  };
}

/**
 * Whether a turn's row drawn from `a` shows `b` as it is: the same turn, in the same state, with
 * the same usage (a stopped turn's spend is stored after its cancel answered).
 */
function sameTurn(a: any, b: any): boolean {
  const same = a.status === b.status && a.started_at === b.started_at && a.completed_at === b.completed_at;
  return same && JSON.stringify(a.usage ?? null) === JSON.stringify(b.usage ?? null);
}

/**
 * Runs `change` (rows added, replaced or redrawn in `list`) so that what the reader looks at
 * stays where it was: when the list's top is scrolled out of view, the page scrolls by what the
 * rows above the first of those shown before moved it. A row drawn again in its place (a new
 * element for the same turn) stands for the one it replaced; when the first row shown went, the
 * next shown that stays is measured.
 */
function keepingScroll<T>(list: HTMLElement, change: () => T): T {
  // The list's top in view: a change inside it moves nothing the reader looks at above it.
  if (list.getBoundingClientRect().top >= 0) return change();
  const rows = [...list.children] as HTMLElement[];
  const first = rows.findIndex((entry) => entry.getBoundingClientRect().bottom > 0);
  const shown = (first < 0 ? [] : rows.slice(first))
    .filter((entry, index) => index === 0 || entry.getBoundingClientRect().top < window.innerHeight)
    .map((entry) => ({ entry, turn: turnOf(entry), top: entry.getBoundingClientRect().top }));
  const result = change();
  if (list.getBoundingClientRect().top >= 0) return result;
  for (const { entry, turn, top } of shown) {
    const now = entry.isConnected
      ? entry
      : turn && list.querySelector(`:scope > li > details[data-turn="${turn}"]`)?.parentElement;
    if (!now) continue;
    window.scrollBy(0, now.getBoundingClientRect().top - top);
    break;
  }
  return result;
}

/** The number of the turn a row of the list shows. */
function turnOf(entry: Element): string | undefined {
  return entry.querySelector(':scope > details[data-turn]')?.getAttribute('data-turn') ?? undefined;
}

/**
 * A turn's entry in the list; a queued or running one is followed live, and redrawn once it
 * ended (`ended` gets its receipt then), expanded again when it was.
 */
function turnEntry(
  id: string,
  turn: any,
  ended: (turn: any) => void,
  forkSeq: number | null,
): { entry: HTMLElement; end?: (turn: any) => void } {
  const entry = el('li', {}, turnRow(id, turn, forkSeq));
  if (!isOpen(turn)) return { entry };
  // Its live text grows, then its live part goes: the rows below it move, the reader's place is kept.
  const kept = (change: () => void) => {
    const list = entry.parentElement;
    if (list) keepingScroll(list, change);
    else change();
  };
  const end = followTurn(
    id,
    turn,
    entry,
    (now) => {
      kept(() => {
        const row = turnRow(id, now, forkSeq);
        if (entry.querySelector('details')?.open) row.setAttribute('open', '');
        // Its Cancel pressed from the keyboard: the focus goes to the row drawn in its place.
        const focused = entry.contains(document.activeElement);
        entry.replaceChildren(row);
        if (focused) row.querySelector('summary')?.focus();
        ended(now);
      });
      void refreshQueue(id).catch(report);
    },
    kept,
  );
  return { entry, end };
}

/** A turn's row: its summary line, expanded (and loaded) on the first open. */
function turnRow(id: string, turn: any, forkSeq: number | null): HTMLElement {
  const details = el('details', { class: `turn status-${turn.status}`, 'data-turn': String(turn.turn) });
  // An aborted turn's receipt ends with its `abort` notice, which the summary names already.
  const abort = turn.status === 'aborted' ? turn.error?.details?.stored_as : undefined;
  const notices = turn.notices.filter((notice: any) => notice.stored_as !== abort).length;
  details.appendChild(
    el(
      'summary',
      {},
      turnSummary(turn),
      notices > 0 ? el('span', { class: 'mark inbox-mark' }, ` ${counted(notices, 'notice')}`) : null,
      turn.error && turn.status !== 'aborted' ? el('span', { class: 'mark error-mark' }, ` ${turn.error.code}`) : null,
      forkSeq !== null && turn.input && turn.input.first_seq <= forkSeq
        ? el('span', { class: 'mark parent-mark' }, " parent's turn")
        : null,
    ),
  );
  // Loaded on the first open; one that failed says so in the row, and is tried again on the next open.
  let loaded = false;
  details.addEventListener('toggle', () => {
    if (!details.hasAttribute('open') || loaded) return;
    loaded = true;
    details.querySelector(':scope > .turn-error')?.remove();
    void expandTurn(id, turn, details).catch((error) => {
      loaded = false;
      details.querySelector(':scope > .turn-body')?.remove();
      if (error instanceof Unauthorized) return;
      const reason = error instanceof Error ? error.message : String(error);
      details.appendChild(
        el(
          'p',
          { class: 'error turn-error', role: 'alert' },
          `This turn could not be loaded (${reason}): close it and open it again to try again.`,
        ),
      );
    });
  });
  return details;
}
