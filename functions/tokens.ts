import { verify, sign } from 'hono/jwt';
import { JwtTokenSignatureMismatched } from 'hono/utils/jwt/types';
import { z } from 'zod';
import { idSchema } from '../lib/items.ts';
import type { ServiceConfig } from '../lib/config.ts';

/**
 * Scoped, expiring bearer tokens: HS256 JWTs (hono/jwt) verified without storage. A token
 * names its scopes, optionally the one session it is bound to, and for a bound token the
 * session's token generation at minting (revocation bumps the session's generation).
 */

export const SCOPES = ['inbox:write', 'inbox:read', 'session:read', 'session:turn', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];
export const scopeSchema = z.enum(SCOPES);

export const DEFAULT_TTL_SECONDS = 3600;
export const MAX_TTL_SECONDS = 30 * 24 * 3600;

/** The `security` of a route that needs `scope` (createRoute's field; also what auth enforces). */
export function requires(scope: Scope): [{ bearer: [Scope] }] {
  return [{ bearer: [scope] }];
}

/** Whether tokens holding `held` may use a route that requires `required`. */
export function grants(held: readonly Scope[], required: Scope): boolean {
  if (held.includes('admin') || held.includes(required)) return true;
  return required === 'session:read' && held.includes('session:turn');
}

/** Who a request acts as: API_TOKEN and anonymous local mode are unbound admins. */
export interface Principal {
  scopes: Scope[];
  /** The session a scoped token is bound to (null: any session). */
  sessionId: string | null;
  /** For a bound token, the session's token generation it was minted at. */
  generation: number;
  /**
   * For a bound token, the incarnation of the session it was minted for (its storage
   * generation): a session deleted and created again with the same id is another one.
   * Undefined in tokens minted before incarnations were recorded.
   */
  incarnation?: string;
}

export const ADMIN: Principal = { scopes: ['admin'], sessionId: null, generation: 0 };

/** Why a token does not verify; `description` is safe to send (it names no key material). */
export class TokenRejection extends Error {
  constructor(readonly description: string) {
    super(description);
    this.name = 'TokenRejection';
  }
}

const SIGNING_KEY_LABEL = 'tailgate token signing key v1';
const encoder = new TextEncoder();
const HMAC = { name: 'HMAC', hash: 'SHA-256' } as const;

/**
 * The HS256 key: TOKEN_SIGNING_KEY's bytes, or else HMAC-SHA256(API_TOKEN, a fixed label),
 * so the raw API_TOKEN never signs anything. Null when neither is set.
 */
export async function signingKey(
  config: Pick<ServiceConfig, 'apiToken' | 'tokenSigningKey'>,
): Promise<CryptoKey | null> {
  let material: Uint8Array<ArrayBuffer>;
  if (config.tokenSigningKey !== undefined) material = encoder.encode(config.tokenSigningKey);
  else if (config.apiToken !== undefined) {
    const base = await crypto.subtle.importKey('raw', encoder.encode(config.apiToken), HMAC, false, ['sign']);
    material = new Uint8Array(await crypto.subtle.sign('HMAC', base, encoder.encode(SIGNING_KEY_LABEL)));
  } else return null;
  return crypto.subtle.importKey('raw', material, HMAC, false, ['sign', 'verify']);
}

const claimsSchema = z.object({
  scope: z.string().transform((text, context) => {
    const parsed = z.array(scopeSchema).min(1).safeParse(text.split(' '));
    if (!parsed.success) {
      context.addIssue({ code: 'custom', message: 'unknown scope' });
      return z.NEVER;
    }
    return parsed.data;
  }),
  session_id: idSchema.optional(),
  gen: z.number().int().nonnegative().optional(),
  inc: z.string().max(64).optional(),
  exp: z.number().int(),
});

export interface MintedToken {
  token: string;
  scopes: Scope[];
  session_id: string | null;
  expires_at: string;
}

/** Signs a token; `generation` is the bound session's token generation (ignored unbound). */
export async function mintToken(
  key: CryptoKey,
  request: { scopes: Scope[]; sessionId: string | null; generation: number; incarnation?: string; ttlSeconds: number },
  now: Date,
): Promise<MintedToken> {
  const scopes = [...new Set(request.scopes)];
  const issuedAt = Math.floor(now.getTime() / 1000);
  const exp = issuedAt + request.ttlSeconds;
  const payload = {
    scope: scopes.join(' '),
    ...(request.sessionId !== null
      ? {
          session_id: request.sessionId,
          gen: request.generation,
          ...(request.incarnation ? { inc: request.incarnation } : {}),
        }
      : {}),
    iat: issuedAt,
    exp,
  };
  const token = await sign(payload, key, 'HS256');
  return { token, scopes, session_id: request.sessionId, expires_at: new Date(exp * 1000).toISOString() };
}

/**
 * Verifies a token's signature, then its expiry against `now`, then its claims. Throws a
 * TokenRejection saying which of the three failed.
 */
export async function verifyToken(key: CryptoKey, token: string, now: Date): Promise<Principal> {
  let payload: unknown;
  try {
    // Time claims are checked here against the service clock, after the signature.
    payload = await verify(token, key, { alg: 'HS256', exp: false, nbf: false, iat: false });
  } catch (error) {
    if (error instanceof JwtTokenSignatureMismatched) throw new TokenRejection('the token signature does not verify');
    throw new TokenRejection('the token is malformed');
  }
  const claims = claimsSchema.safeParse(payload);
  if (!claims.success) throw new TokenRejection('the token is malformed');
  if (claims.data.exp * 1000 <= now.getTime())
    throw new TokenRejection(`the token expired at ${new Date(claims.data.exp * 1000).toISOString()}`);
  const sessionId = claims.data.session_id ?? null;
  if (sessionId !== null && claims.data.gen === undefined) throw new TokenRejection('the token is malformed');
  return {
    scopes: claims.data.scope,
    sessionId,
    generation: claims.data.gen ?? 0,
    ...(claims.data.inc !== undefined ? { incarnation: claims.data.inc } : {}),
  };
}
