/** The API calls: the bearer token from sessionStorage in the Authorization header, never in a URL. */
import { ApiError, showToken, TOKEN_KEY, Unauthorized } from './view.ts';

export const PAGE = 30;

/**
 * The size limits the API names on a session's read (functions/routes/sessions.ts): the largest
 * request body (MAX_BODY_BYTES) and decoded image (MAX_IMAGE_BYTES) it takes; null until read.
 */
let limits: { body: number; image: number } | null = null;

/** The API's size limits, as last read, or null. */
export const sizeLimits = () => limits;

/** Keeps the size limits a response names. */
function noteLimits(headers: Headers): void {
  const body = Number(headers.get('tailgate-max-body-bytes'));
  const image = Number(headers.get('tailgate-max-image-bytes'));
  if (body > 0 && image > 0) limits = { body, image };
}

/** The Authorization header, when a token is kept. */
export function authorization(): Record<string, string> {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
}

/** A 401: shows the token form, saying so when the kept token was refused (and forgetting it). */
export function unauthorized(): void {
  const refused = sessionStorage.getItem(TOKEN_KEY) !== null;
  sessionStorage.removeItem(TOKEN_KEY);
  showToken(refused ? 'The API refused this token (401): check it and enter it again.' : '');
}

/** Fetches `path` (JSON in and out); a 401 shows the token form and throws Unauthorized. */
export async function api(path: string, init: RequestInit = {}): Promise<any> {
  const headers = new Headers(init.headers);
  for (const [name, value] of Object.entries(authorization())) headers.set(name, value);
  if (init.body !== undefined) headers.set('content-type', 'application/json');
  const response = await fetch(path, { ...init, headers });
  noteLimits(response.headers);
  if (response.status === 401) {
    unauthorized();
    throw new Unauthorized('unauthorized');
  }
  const text = await response.text();
  const body = text && (response.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : text;
  if (!response.ok) throw new ApiError(body?.error?.message ?? `HTTP ${response.status}`, response.status);
  return body;
}

/** The path of a session, or of something under it (`sessionPath(id, '/inbox')`). */
export function sessionPath(id: string, rest = ''): string {
  return `/v1/sessions/${encodeURIComponent(id)}${rest}`;
}
