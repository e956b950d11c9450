/** The sessions list: a page at a time, filtered by the search box, and a new session. */
import { api, PAGE } from './api.ts';
import { $, el, timeAgo } from './dom.ts';
import { paged } from './paging.ts';
import { may, offerIf } from './token.ts';
import { report, show } from './view.ts';

/** The list, for a token that may list sessions (`admin`); another one is told so, and may open a session by id. */
export function listSessions(): void {
  show('list-view');
  offerIf($('new-session'), 'admin');
  if (!may('admin')) {
    $('session-table').querySelector('tbody')!.replaceChildren();
    $('list-more').textContent = 'This token cannot list sessions (that needs admin): open a session by its id.';
    return;
  }
  paged($('session-table').querySelector('tbody')!, $('list-more'), 'sessions', async (after) => {
    const page = await api(`/v1/sessions?limit=${PAGE}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    const rows = page.sessions.map((session: any) => {
      const counts = session.counts ?? { items: '', turns: '', tool_calls: '' };
      const row = el(
        'tr',
        { 'data-id': session.id },
        el('td', {}, el('a', { href: `#/s/${encodeURIComponent(session.id)}` }, session.id)),
        el('td', {}, String(counts.items)),
        el('td', {}, String(counts.turns)),
        el('td', {}, String(counts.tool_calls)),
        el('td', {}, session.last_activity_at ? timeAgo(session.last_activity_at) : ''),
      );
      row.hidden = !matchesSearch(session.id);
      return row;
    });
    return { rows, next: page.has_more ? page.next_after : null };
  });
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
