/**
 * The inspector's browser script, bundled from this folder into .assets/ui/app.js (served as /ui/app.js) by
 * scripts/assets.mjs. It renders into the server-rendered shell of ../page.ts with
 * plain DOM calls: the API is the state, every view is a fetch away. One module a concern;
 * this one routes on the URL's hash and wires the forms that are not a view's own.
 */
import { $ } from './dom.ts';
import { wireInbox } from './inbox.ts';
import { currentSession, openSession, wireChat } from './session.ts';
import { listSessions, wireSessions } from './sessions.ts';
import { boundSession } from './token.ts';
import { report, showToken, status, stopLoaders, TOKEN_KEY } from './view.ts';

function route(): void {
  stopLoaders();
  status('');
  const id = currentSession();
  // A token bound to a session opens that session: it could list no other.
  const bound = boundSession();
  // The API needs a token and the tab holds none: asked for before any call (one would be a 401).
  if (document.body.dataset.token === 'required' && !sessionStorage.getItem(TOKEN_KEY)) showToken();
  else if (!id && bound !== null) location.replace(`#/s/${encodeURIComponent(bound)}`);
  else if (id) void openSession(id).catch(report);
  else listSessions();
}

$('token-form').addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $<HTMLInputElement>('token-input').value.trim());
  $<HTMLInputElement>('token-input').value = '';
  route();
});
$('sign-out').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  route();
});
wireSessions();
wireChat();
wireInbox(currentSession);
window.addEventListener('hashchange', route);
route();
