/**
 * What the kept token may do, read from its claims: a minted token is a JWT whose claims its
 * holder can read (docs/SECURITY.md), `scope` and, bound to a session, `session_id`. The page
 * offers only the actions the API would allow; the API still decides. A token that is not a JWT
 * (API_TOKEN) and no token at all (anonymous access) may do everything.
 */
import { TOKEN_KEY } from './view.ts';

interface Claims {
  scopes: string[];
  sessionId: string | null;
}

function claims(): Claims | null {
  const payload = sessionStorage.getItem(TOKEN_KEY)?.split('.')[1];
  if (!payload) return null;
  try {
    const json = JSON.parse(atob(payload.replaceAll('-', '+').replaceAll('_', '/')));
    if (typeof json?.scope !== 'string') return null;
    return { scopes: json.scope.split(' '), sessionId: typeof json.session_id === 'string' ? json.session_id : null };
  } catch {
    return null;
  }
}

/** Whether the token grants `scope` (functions/tokens.ts `grants`: `session:turn` reads too). */
export function may(scope: 'admin' | 'session:read' | 'session:turn' | 'inbox:read' | 'inbox:write'): boolean {
  const held = claims()?.scopes;
  if (!held || held.includes('admin') || held.includes(scope)) return true;
  return scope === 'session:read' && held.includes('session:turn');
}

/** The session the token is bound to, or null (unbound, API_TOKEN, none). */
export function boundSession(): string | null {
  return claims()?.sessionId ?? null;
}

/** Shows `element` only when the token grants `scope`. */
export function offerIf(element: HTMLElement, scope: Parameters<typeof may>[0]): void {
  element.hidden = !may(scope);
}
