/** A session's inbox: pending and delivered notices, posting a notice, aborting the next turn. */
import { api, sessionPath } from './api.ts';
import { $, el } from './dom.ts';
import { preview } from './config.ts';
import { counted } from './format.ts';
import { pagedByButton, pagesAfter } from './paging.ts';
import { may } from './token.ts';
import { ApiError, report, showLoadError, Unauthorized } from './view.ts';

const LISTS = ['inbox-pending', 'inbox-delivered'];

/** Both inbox lists say the token cannot read the inbox. */
function showUnreadable(): void {
  for (const list of LISTS) {
    $(list).replaceChildren(el('li', { class: 'muted' }, 'this token cannot read the inbox (inbox:read)'));
    $(`${list}-more`).replaceChildren();
  }
}

const pendingRow = (notice: any) => el('li', {}, `${notice.name} (${counted(notice.size, 'byte')})`);

/**
 * A delivery record: its turn, or (`turn` null) the next turn's, which takes over what a turn
 * closed by someone else took.
 */
const deliveredRow = (notice: any) => {
  const turn =
    notice.turn === null ? 'the next turn (a turn closed by someone else took it)' : `turn ${notice.turn ?? '?'}`;
  return el('li', {}, `${notice.name} → ${turn}${notice.stored_as !== notice.name ? ` as ${notice.stored_as}` : ''}`);
};

/**
 * The inbox's pending notices and delivery records, a page of each, with a button for the next
 * page while there is one; a token without `inbox:read` sees both lists say so, not an error:
 * one whose claims lack the scope without asking (a refused fetch is a console error in the
 * browser), one the API refuses all the same (403) once refused.
 */
export async function refreshInbox(id: string): Promise<void> {
  if (!may('inbox:read')) return showUnreadable();
  const base = sessionPath(id, '/inbox');
  // A list that failed to load says so under it, with a Retry button; a 403 is thrown on.
  const load = async (list: string, noun: string, path: string, key: string, row: (record: any) => Node) => {
    try {
      const shown = await pagedByButton($(list), $(`${list}-more`), `More ${noun}`, pagesAfter(path, key, row));
      if (shown && $(list).childElementCount === 0) $(`${list}-more`).textContent = 'None.';
    } catch (error) {
      if (error instanceof ApiError && error.status === 403) throw error;
      showLoadError($(`${list}-more`), `The ${noun}`, error, () => void load(list, noun, path, key, row).catch(report));
    }
  };
  try {
    await Promise.all([
      load('inbox-pending', 'pending notices', base, 'pending', pendingRow),
      load('inbox-delivered', 'delivered notices', `${base}/delivered`, 'delivered', deliveredRow),
    ]);
  } catch {
    showUnreadable();
  }
}

/** What the inbox forms did, beside them: `text`, as a refusal (red) when `refused`. */
function say(text: string, refused = false): void {
  $('inbox-status').textContent = text;
  $('inbox-status').className = refused ? 'error' : '';
}

/** A refusal's reason for `say`, or null for a 401 (the token form shows). */
function refusal(error: unknown): string | null {
  if (error instanceof Unauthorized) return null;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Wires the notice and abort forms to the session `currentSession()` names; what they did (or
 * why the API refused it, what was typed kept) shows beside them.
 */
export function wireInbox(currentSession: () => string | null): void {
  $('notice-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    if (!id) return;
    const name = $<HTMLInputElement>('notice-name').value.trim();
    say('');
    let posted: any;
    try {
      posted = await api(sessionPath(id, '/inbox'), {
        method: 'POST',
        body: JSON.stringify({ content: $<HTMLTextAreaElement>('notice-content').value, ...(name ? { name } : {}) }),
      });
    } catch (error) {
      const reason = refusal(error);
      if (reason !== null) say(`Notice refused: ${reason}`, true);
      return;
    }
    $<HTMLTextAreaElement>('notice-content').value = '';
    $<HTMLInputElement>('notice-name').value = '';
    say(`Notice ${posted?.name ?? name} posted.`);
    try {
      await refreshInbox(id);
      await preview(id);
    } catch (error) {
      report(error);
    }
  });
  $('abort-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    if (!id) return;
    say('');
    try {
      await api(sessionPath(id, '/inbox'), {
        method: 'POST',
        body: JSON.stringify({ name: 'abort', content: $<HTMLInputElement>('abort-reason').value || 'aborted' }),
      });
    } catch (error) {
      const reason = refusal(error);
      if (reason !== null) say(`Abort refused: ${reason}`, true);
      return;
    }
    say('Abort posted: the next turn stops before calling the model.');
    await refreshInbox(id).catch(report);
  });
}
