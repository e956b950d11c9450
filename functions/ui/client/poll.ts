/**
 * Live updates of the open view, polled: the API has no change feed across turns, and a read
 * of what a view summarizes (the session, or the first page of the session index) tells
 * whether anything changed at the cost of a few storage reads. `step` runs every 5 s while the
 * tab is shown, every 60 s while it is hidden (and at once when it is shown again). A failed
 * step (the network down, a 5xx, no answer within STEP_MS) shows the state line with the reason
 * and a "Retry now" button, and is tried again after 10, 20, 40, then every 60 s; a 401 shows
 * the token form (api.ts), and the view polls again once a token is entered.
 */
import { $ } from './dom.ts';
import { ApiError, keepLoader, Unauthorized } from './view.ts';

export const VISIBLE_MS = 5_000;
export const HIDDEN_MS = 60_000;
/**
 * How long a step may take: one still under way then is aborted and fails, so that a request
 * the API never answers does not hold back every later step.
 */
export const STEP_MS = 30_000;

/** The wait before the next step: 5 s shown, 60 s hidden, doubled per failure in a row up to 60 s. */
export function pollDelay(hidden: boolean, failures: number): number {
  const shown = Math.min(HIDDEN_MS, VISIBLE_MS * 2 ** failures);
  return hidden ? Math.max(HIDDEN_MS, shown) : shown;
}

/** What a failed step tells the reader. */
export function pollFailure(error: unknown, retryMs: number): string {
  const reason =
    error instanceof ApiError
      ? `the API answered ${error.status} (${error.message})`
      : error instanceof TypeError
        ? 'the API could not be reached'
        : error instanceof Error
          ? error.message
          : String(error);
  return `Live updates paused: ${reason}. Trying again in ${Math.round(retryMs / 1000)} s.`;
}

/** The state line: a failure's text and the retry button, or hidden. */
function showState(message: string | null): void {
  $('live-state').hidden = message === null;
  $('live-message').textContent = message ?? '';
}

/**
 * Runs `step` on the schedule above until the view changes (the view's loaders stop it), and
 * returns a function that runs it at once (again once the step under way ended, which may have
 * read too early). `step` passes `signal` to its API calls: a step under way when the view
 * changes is aborted, and draws nothing into the next view; one under way for STEP_MS is aborted
 * and fails.
 */
export function poll(step: (signal: AbortSignal) => Promise<void>): () => void {
  let failures = 0;
  let stopped = false;
  let running = false;
  /** Asked to run at once while a step ran: the step under way may have read too early. */
  let again = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** The step under way's own abort: by `stop`, or by its deadline. */
  let current: AbortController | undefined;
  const schedule = () => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(() => void run(), pollDelay(document.hidden, failures));
  };
  const run = async () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = true;
    again = false;
    clearTimeout(timer);
    const controller = new AbortController();
    current = controller;
    const late = new Error(`the API did not answer within ${STEP_MS / 1000} s`);
    const deadline = setTimeout(() => controller.abort(late), STEP_MS);
    try {
      await step(controller.signal);
      failures = 0;
      if (!stopped) showState(null);
    } catch (error) {
      // A 401 showed the token form, which stopped this view's loaders.
      if (error instanceof Unauthorized || stopped) return;
      failures++;
      showState(pollFailure(controller.signal.reason === late ? late : error, pollDelay(document.hidden, failures)));
    } finally {
      clearTimeout(deadline);
      running = false;
    }
    if (again) void run();
    else schedule();
  };
  const onVisibility = () => {
    if (!document.hidden) void run();
  };
  document.addEventListener('visibilitychange', onVisibility);
  $('live-retry').onclick = () => void run();
  keepLoader(() => {
    stopped = true;
    current?.abort();
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisibility);
    showState(null);
  });
  schedule();
  return () => void run();
}
