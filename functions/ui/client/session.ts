/** The session view: counts, config, inbox and timeline of the session in the URL's hash. */
import { api, sessionPath } from './api.ts';
import { renderBudget } from './budget.ts';
import { attachedImage, chatView, clearChat, detachImage, takeTurn, trackChatHeight, wireImage } from './chat.ts';
import { preview, renderConfig } from './config.ts';
import { $ } from './dom.ts';
import { countsText } from './format.ts';
import { refreshInbox } from './inbox.ts';
import { renderForks, renderLineage } from './lineage.ts';
import { refreshQueue } from './queue.ts';
import { poll } from './poll.ts';
import { loadTimeline, type Timeline } from './timeline.ts';
import { offerIf } from './token.ts';
import { report, show, stopLoaders, TOKEN_KEY } from './view.ts';

/** What a session's view fills in: emptied when another opens, before anything is fetched. */
const FILLED = [
  'session-counts',
  'session-budget-box',
  'session-lineage',
  'session-forks',
  'timeline',
  'timeline-more',
  'queue-held',
  'queue-list',
  'queue-empty',
  'queue-status',
  'inbox-status',
  'inbox-pending',
  'inbox-pending-more',
  'inbox-delivered',
  'inbox-delivered-more',
  'config-status',
  'preview-counts',
];

/**
 * The session the view last opened, and with which token: while both stay, the view stays shown
 * as it loads again, with the chat box's answer.
 */
let opened = '';

/** Runs the open view's live update at once (poll.ts), as after a turn taken from the chat box. */
let updateNow: () => void = () => undefined;

/** The session id of `#/s/{id}`, or null on the sessions list. */
export function currentSession(): string | null {
  const match = /^#\/s\/(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]!) : null;
}

/**
 * Opens (or opens again) the view: whatever the view before left loading
 * stops first, and what it showed goes, so a session the token may not read (or that does not
 * exist) shows its title and the API's answer only, never another session's contents. The
 * actions the token may not take are not offered (the config form says it cannot save: config.ts).
 */
export async function openSession(id: string): Promise<void> {
  stopLoaders();
  show('session-view');
  $('session-title').textContent = `Session ${id}`;
  for (const part of FILLED) $(part).replaceChildren();
  const now = JSON.stringify([sessionStorage.getItem(TOKEN_KEY), id]);
  if (now !== opened) {
    $('session-body').hidden = true;
    clearChat();
    $<HTMLButtonElement>('chat-send').disabled = false;
  }
  opened = now;
  const session = await api(sessionPath(id));
  $('session-body').hidden = false;
  offerIf($('chat-section'), 'session:turn');
  offerIf($('notice-form'), 'inbox:write');
  offerIf($('abort-form'), 'inbox:write');
  $('session-counts').textContent = countsText(session);
  renderBudget(id, session, true);
  renderLineage(session);
  renderConfig(id, session);
  void refreshInbox(id).catch(report);
  void renderForks(id).catch(report);
  void refreshQueue(id).catch(report);
  followSession(id, session, loadTimeline(id, session.forked_from?.seq ?? null));
}

/**
 * Live updates (poll.ts): the session read again (its counts and totals come from its newest
 * record); when they changed, the counts line and the timeline's newest turns, and the queue
 * when a turn came.
 */
function followSession(id: string, session: any, timeline: Timeline): void {
  const mark = (now: any) => JSON.stringify([now.counts, now.usage]);
  let seen = mark(session);
  updateNow = poll(async (signal) => {
    const now = await api(sessionPath(id), { signal });
    renderBudget(id, now);
    if (mark(now) === seen || !timeline.ready()) return;
    const counts = countsText(now);
    if ($('session-counts').textContent !== counts) $('session-counts').textContent = counts;
    if (await timeline.newer(now.counts.turns, signal)) void refreshQueue(id).catch(report);
    seen = mark(now);
  });
}

/**
 * Wires the chat box: a turn (Send disabled until it ended: a second one would be refused, and
 * would take the box's answer), then what it changed in the view, which stays as the reader
 * left it (expanded turns, the scroll position, the config form): the live update at once
 * (counts, the new turn on top, the queue), the inbox (notices it delivered) and the preview.
 * Once another session's view shows, the turn changes nothing more in the page.
 */
export function wireChat(): void {
  wireImage();
  trackChatHeight();
  const send = $<HTMLButtonElement>('chat-send');
  // Ctrl+Enter (Cmd+Enter) sends, as Send does; Enter alone is a new line.
  $('chat-input').addEventListener('keydown', (event) => {
    if (event.key !== 'Enter' || !(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    $<HTMLFormElement>('chat-form').requestSubmit();
  });
  $('chat-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    const input = $<HTMLTextAreaElement>('chat-input').value;
    const image = attachedImage();
    if (!id || (!input.trim() && !image) || send.disabled) return;
    const view = chatView();
    send.disabled = true;
    try {
      const taken = await takeTurn(id, input, image);
      if (chatView() !== view) return;
      // A refused turn stored nothing: its input (and image) stays, to send again.
      if (taken) {
        $<HTMLTextAreaElement>('chat-input').value = '';
        if (attachedImage() === image) detachImage();
      }
      updateNow();
      void refreshInbox(id).catch(report);
      void preview(id).catch(report);
    } catch (error) {
      report(error);
    } finally {
      if (chatView() === view) send.disabled = false;
    }
  });
}
