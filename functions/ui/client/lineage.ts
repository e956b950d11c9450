/**
 * Forks: a fork's parent (its `forked_from`), the session's own forks (GET .../forks, a page at
 * a time), and "Fork here" on a turn.
 */
import { api, sessionPath } from './api.ts';
import { $, el } from './dom.ts';
import { pagedByButton, pagesAfter } from './paging.ts';
import { boundSession, may } from './token.ts';
import { showLoadError, Unauthorized } from './view.ts';

/** A link to session `id`; its id alone for a token bound to another session, which could not open it. */
function sessionLink(id: string): HTMLElement {
  const bound = boundSession();
  return bound !== null && bound !== id ? el('span', {}, id) : el('a', { href: `#/s/${encodeURIComponent(id)}` }, id);
}

/** The session's parent, when it is a fork of another session. */
export function renderLineage(session: any): void {
  const parent = session.forked_from;
  $('session-lineage').replaceChildren(
    ...(parent ? [el('p', {}, 'Fork of ', sessionLink(parent.id), ` after seq ${parent.seq}`)] : []),
  );
}

/** The fork list last asked for: an earlier one answered late is not shown. */
let latestForks: HTMLElement | null = null;

/**
 * The session's live forks, each linked, with a button for the next page while there is one; a
 * list that failed to load says so in its place, with a Retry button.
 */
export async function renderForks(id: string): Promise<void> {
  const list = el('ul', { class: 'fork-list' });
  const more = el('div');
  latestForks = list;
  const row = (fork: any) => el('li', {}, sessionLink(fork.id), ` after seq ${fork.seq}`);
  try {
    await pagedByButton(list, more, 'More forks', pagesAfter(sessionPath(id, '/forks'), 'forks', row));
  } catch (error) {
    if (latestForks === list) showLoadError($('session-forks'), 'The forks', error, () => void renderForks(id));
    return;
  }
  if (latestForks === list && (list.childElementCount > 0 || more.childElementCount > 0))
    $('session-forks').replaceChildren(el('p', {}, 'Forks:'), list, more);
}

/**
 * A "Fork here" button forking session `id` after `turn`, then opening the fork; a refusal shows
 * beside it. None for a token that may not fork: one without `admin`, or bound to a session (the
 * fork would be another session).
 */
export function forkButton(id: string, turn: number): HTMLElement | null {
  if (!may('admin') || boundSession() !== null) return null;
  const button = el('button', { type: 'button', class: 'fork-here' }, 'Fork here');
  const message = el('span', { class: 'error fork-error', role: 'alert' });
  button.addEventListener('click', async () => {
    message.textContent = '';
    try {
      const fork = await api(sessionPath(id, '/fork'), { method: 'POST', body: JSON.stringify({ at_turn: turn }) });
      location.hash = `#/s/${encodeURIComponent(fork.id)}`;
    } catch (error) {
      if (!(error instanceof Unauthorized))
        message.textContent = `Fork refused: ${error instanceof Error ? error.message : String(error)}`;
    }
  });
  return el('p', { class: 'row' }, button, message);
}
