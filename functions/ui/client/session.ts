/** The session view: counts, config, inbox and timeline of the session in the URL's hash. */
import { api, sessionPath } from './api.ts';
import { takeTurn } from './chat.ts';
import { renderConfig } from './config.ts';
import { $ } from './dom.ts';
import { countsText } from './format.ts';
import { refreshInbox } from './inbox.ts';
import { renderForks, renderLineage } from './lineage.ts';
import { refreshQueue } from './queue.ts';
import { loadTimeline } from './timeline.ts';
import { report, show, stopLoaders } from './view.ts';

/** The session id of `#/s/{id}`, or null on the sessions list. */
export function currentSession(): string | null {
  const match = /^#\/s\/(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]!) : null;
}

/** Opens (or opens again, after a chat turn) the view: whatever the view before left loading stops first. */
export async function openSession(id: string): Promise<void> {
  stopLoaders();
  show('session-view');
  $('session-title').textContent = `Session ${id}`;
  const session = await api(sessionPath(id));
  $('session-counts').textContent = countsText(session);
  renderLineage(session);
  renderConfig(id, session);
  void refreshInbox(id).catch(report);
  void renderForks(id).catch(report);
  void refreshQueue(id).catch(report);
  loadTimeline(id);
}

/** Wires the chat box: a turn, then the session view again. */
export function wireChat(): void {
  $('chat-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const id = currentSession();
    const input = $<HTMLTextAreaElement>('chat-input').value;
    if (!id || !input.trim()) return;
    try {
      await takeTurn(id, input);
      $<HTMLTextAreaElement>('chat-input').value = '';
      await openSession(id);
    } catch (error) {
      report(error);
    }
  });
}
