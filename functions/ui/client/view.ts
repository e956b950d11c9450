/**
 * Which of the page's views shows, the status line, and the loaders of the current view
 * (stopped when the view changes or the token is asked for).
 */
import { $, el } from './dom.ts';

export const TOKEN_KEY = 'tailgate.token';

/** Thrown by the API calls after a 401, once the token form shows: nothing more to report. */
export class Unauthorized extends Error {}

/** An API answer other than 2xx (a 401 is Unauthorized): its message and status. */
export class ApiError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
}

let loaders: (() => void)[] = [];

/** Keeps a loader's stop function, called when the view changes. */
export function keepLoader(stop: () => void): void {
  loaders.push(stop);
}

export function stopLoaders(): void {
  for (const stop of loaders) stop();
  loaders = [];
}

export function show(view: 'token-view' | 'list-view' | 'session-view'): void {
  for (const id of ['token-view', 'list-view', 'session-view']) $(id).hidden = id !== view;
  $('sign-out').hidden = !sessionStorage.getItem(TOKEN_KEY);
}

/** The token form, with `error` above it (none: hidden). */
export function showToken(error = ''): void {
  stopLoaders();
  show('token-view');
  $('token-error').textContent = error;
  $('token-error').hidden = error === '';
  $('token-input').focus();
}

export function status(message: string): void {
  $('status').textContent = message;
}

export function report(error: unknown): void {
  if (error instanceof Unauthorized) return;
  status(error instanceof Error ? error.message : String(error));
}

/**
 * Shows in `where` (in place of what it held) that `what` could not be loaded, why, and a Retry
 * button calling `retry`, as a turn's row says it could not be loaded; a 401 shows nothing (the
 * token form shows).
 */
export function showLoadError(where: HTMLElement, what: string, error: unknown, retry: () => void): void {
  if (error instanceof Unauthorized) return;
  const reason = error instanceof Error ? error.message : String(error);
  const button = el('button', { type: 'button' }, 'Retry');
  button.addEventListener('click', () => {
    where.querySelector(':scope > .load-error')?.remove();
    retry();
  });
  where.replaceChildren(
    el('p', { class: 'error load-error', role: 'alert' }, `${what} could not be loaded (${reason}). `, button),
  );
}
