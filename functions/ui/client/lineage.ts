/**
 * Forks: a fork's parent (its `forked_from`), and "Fork here" on a turn. The API lists no
 * session's forks (the session index does not record a parent), so only the parent shows.
 */
import { api, sessionPath } from './api.ts';
import { $, el } from './dom.ts';
import { Unauthorized } from './view.ts';

const sessionLink = (id: string) => el('a', { href: `#/s/${encodeURIComponent(id)}` }, id);

/** The session's parent, when it is a fork. */
export function renderLineage(session: any): void {
  const parent = session.forked_from;
  $('session-lineage').replaceChildren(
    ...(parent ? [el('p', {}, 'Fork of ', sessionLink(parent.id), ` after seq ${parent.seq}`)] : []),
  );
}

/** A "Fork here" button forking session `id` after `turn`, then opening the fork; a refusal shows beside it. */
export function forkButton(id: string, turn: number): HTMLElement {
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
