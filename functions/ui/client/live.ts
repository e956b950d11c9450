/**
 * A queued or running turn followed live: its events (GET .../turns/{turn}/events, resumed
 * with `?after=N` when the connection drops), its text as it comes, and a Cancel button. Once
 * the turn has ended, `ended` gets its receipt, to redraw the row.
 */
import { api, authorization, sessionPath } from './api.ts';
import { add, el } from './dom.ts';
import { pollDelay } from './poll.ts';
import { readEvents } from './sse.ts';
import { offerIf } from './token.ts';
import { keepLoader, report, Unauthorized } from './view.ts';

/** Whether a turn is still to end: queued (no runner yet) or in progress. */
export const isOpen = (turn: any) => turn.status === 'queued' || turn.status === 'in_progress';

/**
 * Follows `turn` in `box` until it ended, then calls `ended` once. Returns a function that ends
 * it with the turn as read elsewhere (the live updates found it ended): the follower stops.
 * Its text grows `box` through `grow` (which keeps the reader's place), once an animation frame
 * with what came since the last one; so does the reason a cancel was refused.
 */
export function followTurn(
  id: string,
  turn: any,
  box: HTMLElement,
  ended: (turn: any) => void,
  grow: (change: () => void) => void = (change) => change(),
): (now: any) => void {
  const text = el('pre', { class: 'live-text', 'aria-live': 'polite' });
  const cancel = el('button', { type: 'button', class: 'danger' }, 'Cancel');
  offerIf(cancel, 'session:turn');
  const message = el('span', { class: 'error', role: 'alert' });
  const label = el('span', {}, '');
  const showStatus = (status: string) => {
    label.textContent = `Turn ${turn.turn} ${status === 'queued' ? 'queued' : 'running'}`;
  };
  showStatus(turn.status);
  add(box, el('div', { class: 'live' }, el('p', { class: 'row' }, label, cancel, message), text));
  const stopped = new AbortController();
  keepLoader(() => stopped.abort());
  let done = false;
  const end = (now: any) => {
    if (done) return;
    done = true;
    stopped.abort();
    ended(now);
  };
  const path = sessionPath(id, `/turns/${turn.turn}`);
  cancel.addEventListener('click', async () => {
    try {
      await api(`${path}/cancel`, { method: 'POST' });
      end(await api(path));
    } catch (error) {
      if (error instanceof Unauthorized) return;
      // The reason may take a line of its own: the rows below move, the reader's place is kept.
      const reason = `Cancel refused: ${error instanceof Error ? error.message : String(error)}`;
      grow(() => (message.textContent = reason));
    }
  });
  // The text that came since the last frame (none is drawn while the tab is hidden: all of it once shown).
  let pending = '';
  let drawing = false;
  const draw = () => {
    drawing = false;
    const more = pending;
    pending = '';
    if (more !== '' && !stopped.signal.aborted) grow(() => text.append(more));
  };
  let after = 0;
  let failures = 0;
  const follow = async () => {
    for (let now = turn; !stopped.signal.aborted; ) {
      // A queued turn has no events yet: its status is asked again a second later.
      if (now.status === 'in_progress') {
        try {
          const response = await fetch(`${path}/events?after=${after}`, {
            headers: authorization(),
            signal: stopped.signal,
          });
          if (response.ok && response.body)
            await readEvents(response.body, (event, data, number) => {
              if (number !== null) after = number;
              if (event !== 'output_text.delta') return;
              pending += data.delta;
              if (drawing) return;
              drawing = true;
              requestAnimationFrame(draw);
            });
        } catch {
          // The connection dropped (or the view changed): resumed after the last event seen.
        }
      }
      if (stopped.signal.aborted) return;
      try {
        now = await api(path, { signal: stopped.signal });
        failures = 0;
      } catch (error) {
        if (stopped.signal.aborted) return;
        if (!(error instanceof TypeError)) throw error;
        // The API out of reach (the network down, the server restarting): asked again as the live updates are.
        failures++;
      }
      showStatus(now.status);
      if (!isOpen(now)) return end(now);
      await new Promise((resolve) => setTimeout(resolve, failures > 0 ? pollDelay(document.hidden, failures) : 1000));
    }
  };
  void follow().catch(report);
  return end;
}
