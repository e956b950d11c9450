/** The sessions list: a page at a time, filtered by the search box, and a new session. */
import { api, PAGE } from './api.ts';
import { $, el, prepend, timeAgo } from './dom.ts';
import { costText } from './format.ts';
import { paged, recount } from './paging.ts';
import { poll } from './poll.ts';
import { may, offerIf } from './token.ts';
import { report, show, stopLoaders } from './view.ts';

/** The list, for a token that may list sessions (`admin`); another one is told so, and may open a session by id. */
export function listSessions(): void {
  show('list-view');
  offerIf($('new-session'), 'admin');
  if (!may('admin')) {
    $('session-table').querySelector('tbody')!.replaceChildren();
    $('list-more').textContent = 'This token cannot list sessions (that needs admin): open a session by its id.';
    return;
  }
  const body = $('session-table').querySelector('tbody')!;
  const pageOf = (after: string | null, signal?: AbortSignal) =>
    api(`/v1/sessions?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`, signal ? { signal } : {});
  let ready = false;
  paged(
    body,
    $('list-more'),
    'session',
    async (after) => {
      const page = await pageOf(after);
      return { records: page.sessions as any[], next: page.has_more ? (page.next_after as string) : null };
    },
    // Only a page arriving while the list shows.
    (sessions) => {
      ready = true;
      return sessions.map(sessionRow);
    },
  );
  // Live updates (poll.ts): the first page again (one listing of the session index).
  poll(async (signal) => {
    if (!ready) return;
    const page = await pageOf(null, signal);
    const shown = new Set([...body.querySelectorAll('tr')].map((row) => row.getAttribute('data-id')));
    // More sessions came than a page holds (or every shown one of the page went): the list, which
    // could not tell what lies between, loads again from its first page.
    if (shown.size > 0 && page.has_more && !page.sessions.some((session: any) => shown.has(session.id))) {
      stopLoaders();
      return listSessions();
    }
    mergeFirstPage(body, page);
  });
}

/** A session's cells: its link, counts, cost and last activity. */
function sessionCells(session: any): HTMLElement[] {
  const counts = session.counts ?? { items: '', turns: '', tool_calls: '' };
  return [
    el('td', {}, el('a', { href: `#/s/${encodeURIComponent(session.id)}` }, session.id)),
    el('td', {}, String(counts.items)),
    el('td', {}, String(counts.turns)),
    el('td', {}, String(counts.tool_calls)),
    el('td', { class: 'cost' }, listedCost(session.usage)),
    el('td', {}, session.last_activity_at ? timeAgo(session.last_activity_at) : ''),
  ];
}

/**
 * A listed session's cost from its row's `usage` (null without counts: nothing shown); with
 * unpriced turns, what its priced ones cost, marked as a lower bound.
 */
function listedCost(usage: any): string {
  if (!usage) return '';
  return usage.cost_usd === null ? `≥ ${costText(usage.priced_cost_usd)}` : costText(usage.cost_usd);
}

function sessionRow(session: any): HTMLElement {
  const row = el('tr', { 'data-id': session.id }, ...sessionCells(session));
  row.hidden = !matchesSearch(session.id);
  return row;
}

/**
 * The list's first page as the index gives it now, newest created first: a session created
 * since shows on top, a shown one gets its counts and last activity (the cells that changed,
 * in place), and one deleted from among the page's goes.
 */
function mergeFirstPage(body: HTMLElement, page: any): void {
  const rows = new Map([...body.querySelectorAll('tr')].map((row) => [row.getAttribute('data-id')!, row]));
  const listed = new Set(page.sessions.map((session: any) => session.id));
  const last = rows.get(page.sessions.at(-1)?.id);
  for (const row of rows.values()) {
    if (row === last) break;
    if (!listed.has(row.getAttribute('data-id')) && (last !== undefined || !page.has_more)) row.remove();
  }
  const added: HTMLElement[] = [];
  for (const session of page.sessions) {
    const row = rows.get(session.id);
    if (!row) {
      // Newer than every shown one, until the first shown one.
      if (added.length === page.sessions.indexOf(session)) added.push(sessionRow(session));
      continue;
    }
    sessionCells(session).forEach((cell, index) => {
      const old = row.children[index]!;
      if (old.innerHTML !== cell.innerHTML) old.replaceWith(cell);
    });
  }
  prepend(body, ...added);
  recount(body, $('list-more'), 'session');
}

function matchesSearch(id: string): boolean {
  const query = $<HTMLInputElement>('search-input').value.trim();
  return query === '' || id.includes(query);
}

/** Wires the search box and the new-session button (which asks for an id). */
export function wireSessions(): void {
  $('search-input').addEventListener('input', () => {
    for (const row of $('session-table').querySelectorAll('tbody tr'))
      (row as HTMLElement).hidden = !matchesSearch(row.getAttribute('data-id') ?? '');
  });
  $('search-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const query = $<HTMLInputElement>('search-input').value.trim();
    if (query) location.hash = `#/s/${encodeURIComponent(query)}`;
  });
  $('new-session').addEventListener('click', async () => {
    const id = prompt('Id of the new session (empty: a generated one)', '');
    if (id === null) return;
    try {
      const body = JSON.stringify(id.trim() ? { id: id.trim() } : {});
      const created = await api('/v1/sessions', { method: 'POST', body });
      location.hash = `#/s/${encodeURIComponent(created.id)}`;
    } catch (error) {
      report(error);
    }
  });
}
