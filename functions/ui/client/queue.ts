/**
 * The inputs queued behind a running turn (`on_busy: enqueue`, GET .../queue), oldest first.
 * Read when the session opens and whenever a turn it follows ends; while some are listed, read
 * again every 2 seconds until a turn took each up (it then shows as that turn).
 */
import { api, sessionPath } from './api.ts';
import { $, el } from './dom.ts';
import { counted } from './format.ts';
import { keepLoader, report, showLoadError } from './view.ts';

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
  $('queue-list').replaceChildren(
    ...page.queued.map((input: any) =>
      el(
        'li',
        { 'data-queued-turn': input.queued_turn, title: `queued ${input.enqueued_at}` },
        `${input.preview}${input.preview_truncated ? '…' : ''}`,
        el('span', { class: 'muted' }, ` (${counted(input.items, 'item')})`),
      ),
    ),
  );
  const more = page.total - page.queued.length;
  $('queue-empty').textContent = page.total === 0 ? 'Nothing queued.' : more > 0 ? `and ${more} more` : '';
  if (page.total === 0) return;
  timer = setTimeout(() => void refreshQueue(id).catch(report), 2000);
  if (stopKept) return;
  stopKept = true;
  keepLoader(() => {
    clearTimeout(timer);
    stopKept = false;
  });
}
