/**
 * The inputs queued behind a running turn (`on_busy: enqueue`, GET .../queue), oldest first,
 * listed above the turns (which a long history pages in below).
 * Read when the session opens and whenever a turn it follows ends; while some are listed, read
 * again every 2 seconds until a turn took each up (it then shows as that turn). Each has a Withdraw
 * button (`DELETE .../queue/{queued_turn}`, `session:turn`): its turn never runs. While the
 * session's spent budget holds them (the listing's `held`), a line above them says so.
 */
import { api, sessionPath } from './api.ts';
import { heldText } from './budget.ts';
import { $, el } from './dom.ts';
import { counted } from './format.ts';
import { may } from './token.ts';
import { ApiError, keepLoader, report, showLoadError, Unauthorized } from './view.ts';

let timer: ReturnType<typeof setTimeout> | undefined;
let stopKept = false;

/** The read of the queue asked last: an earlier one, answered late, shows nothing. */
let latest: object | null = null;

/** Reads the queue; one that failed to load says so in its place, with a Retry button. */
export async function refreshQueue(id: string): Promise<void> {
  clearTimeout(timer);
  const asked = {};
  latest = asked;
  let page: any;
  try {
    page = await api(sessionPath(id, '/queue'));
  } catch (error) {
    if (latest === asked) showLoadError($('queue-empty'), 'The queue', error, () => void refreshQueue(id));
    return;
  }
  if (latest !== asked) return;
  // The queue stands above the timeline: a reader scrolled into the turns stays where they were,
  // in a browser without scroll anchoring too, as the list grows or shrinks.
  const timeline = $('timeline');
  const top = timeline.getBoundingClientRect().top;
  $('queue-list').replaceChildren(
    ...page.queued.map((input: any) =>
      el(
        'li',
        { 'data-queued-turn': input.queued_turn, title: `queued ${input.enqueued_at}` },
        `${input.preview}${input.preview_truncated ? '…' : ''}`,
        el('span', { class: 'muted' }, ` (${counted(input.items, 'item')})`),
        may('session:turn') ? ' ' : null,
        may('session:turn') ? withdrawButton(id, input.queued_turn) : null,
      ),
    ),
  );
  $('queue-held').textContent = page.held ? heldText(page.held) : '';
  const more = page.total - page.queued.length;
  $('queue-empty').textContent = page.total === 0 ? 'Nothing queued.' : more > 0 ? `and ${more} more` : '';
  if (top < 0) window.scrollBy(0, timeline.getBoundingClientRect().top - top);
  if (page.total === 0) return;
  timer = setTimeout(() => void refreshQueue(id).catch(report), 2000);
  if (stopKept) return;
  stopKept = true;
  keepLoader(() => {
    clearTimeout(timer);
    stopKept = false;
  });
}

/**
 * Withdraws a queued input, then reads the queue again; a refusal shows beside the queue (409:
 * a pickup took it up, it runs as a turn; 404: it is gone already; 403: the token lacks the scope).
 */
function withdrawButton(id: string, queuedTurn: string): HTMLElement {
  const button = el('button', { type: 'button', class: 'withdraw' }, 'Withdraw');
  button.addEventListener('click', async () => {
    // Pressed from the keyboard, the focus goes on to the input in its place, or the queue's title.
    const focused = document.activeElement === button;
    const at = [...$('queue-list').children].indexOf(button.closest('li') as Element);
    (button as HTMLButtonElement).disabled = true;
    $('queue-status').textContent = '';
    try {
      await api(sessionPath(id, `/queue/${encodeURIComponent(queuedTurn)}`), { method: 'DELETE' });
    } catch (error) {
      if (error instanceof Unauthorized) return;
      const reason = error instanceof Error ? error.message : String(error);
      const status = error instanceof ApiError ? error.status : 0;
      $('queue-status').textContent =
        status === 409
          ? `Too late to withdraw: the input was taken up as a turn (${reason}).`
          : status === 403
            ? `This token may not withdraw queued inputs (that needs session:turn): ${reason}`
            : `The input could not be withdrawn: ${reason}`;
    }
    await refreshQueue(id).catch(report);
    if (!focused || button.isConnected) return;
    const rest = [...$('queue-list').querySelectorAll<HTMLElement>('button.withdraw')];
    (rest[Math.min(at, rest.length - 1)] ?? $('queue-title')).focus();
  });
  return button;
}
