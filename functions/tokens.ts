// hono's JWT functions themselves: `hono/jwt` adds its middleware, whose `Jwt` object keeps
// `verifyWithJwks` and `decode` in the Worker bundle as well.
import { verify, sign } from 'hono/utils/jwt/jwt';
import { JwtTokenSignatureMismatched } from 'hono/utils/jwt/types';
import { z } from 'zod';
import { TailgateError } from '../lib/errors.ts';
import { idSchema } from '../lib/items.ts';
import type { ServiceConfig } from '../lib/config.ts';
import { budgetSchema, type Budget } from '../lib/ledger/usage.ts';
import type { TokenBudget } from '../lib/ledger/token-spend.ts';

/**
 * Scoped, expiring bearer tokens: HS256 JWTs (hono's JWT helpers) verified without storage. A token
 * names its scopes, optionally the one session it is bound to, and for a bound token the
 * session's token generation at minting (revocation bumps the session's generation) and its
 * incarnation. The threat model and key rotation are in docs/SECURITY.md.
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

/** The `security` of a route any valid token may use, whatever its scopes (no scope named). */
export function anyToken(): [{ bearer: [] }] {
  return [{ bearer: [] }];
}

/** Whether tokens holding `held` may use a route that requires `required` (null: any token). */
export function grants(held: readonly Scope[], required: Scope | null): boolean {
  if (required === null || held.includes('admin') || held.includes(required)) return true;
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
   * For a bound token, the incarnation of the session it was minted for: its config's
   * `incarnation` (a config without one: its storage generation then, '' for a session written
   * before generations). A session deleted and created again, or imported, with the same id is
   * another one. '' unbound.
   */
  incarnation: string;
  /**
   * A token minted with a budget: its random id (`jti`), expiry and limits, which bound what
   * its turns spend across sessions (lib/ledger/token-spend.ts). Null: no budget.
   */
  budget: TokenBudget | null;
  /** A minted token's expiry (seconds since the epoch); null for API_TOKEN and anonymous access. */
  expires: number | null;
}

export const ADMIN: Principal = {
  scopes: ['admin'],
  sessionId: null,
  generation: 0,
  incarnation: '',
  budget: null,
  expires: null,
};

function randomJti(): string {
  return crypto.randomUUID().replaceAll('-', '');
}

/** A mint a minted token may not make (403 forbidden). */
export class TokenMintRefused extends TailgateError {
  constructor(message: string) {
    super('forbidden', message);
    this.name = 'TokenMintRefused';
  }
}

/** Why a token does not verify; `description` is safe to send (it names no key material). */
export class TokenRejection extends Error {
  readonly description: string;

  constructor(description: string) {
    super(description);
    this.name = 'TokenRejection';
    this.description = description;
  }
}

/** How far ahead of the service clock a token's `iat` and `nbf` may be (another host's clock). */
const CLOCK_TOLERANCE_SECONDS = 60;

const HMAC = { name: 'HMAC', hash: 'SHA-256' } as const;

function hmacKey(text: string): Promise<CryptoKey> {
  return crypto.subtle.importKey('raw', new TextEncoder().encode(text), HMAC, false, ['sign', 'verify']);
}

/**
 * The HS256 key that signs: TOKEN_SIGNING_KEY's text (lib/config.ts checks it holds at least
 * 32 random bytes). Null when it is unset: then no token is minted. API_TOKEN never signs,
 * nor does any key derived from it, so a token's holder cannot test guesses of it offline.
 */
export async function signingKey(config: Pick<ServiceConfig, 'tokenSigningKey'>): Promise<CryptoKey | null> {
  return config.tokenSigningKey === undefined ? null : hmacKey(config.tokenSigningKey);
}

/**
 * The keys a token may be signed with: TOKEN_SIGNING_KEY, then TOKEN_SIGNING_KEY_PREVIOUS
 * during a rotation (docs/SECURITY.md). None without TOKEN_SIGNING_KEY.
 */
export async function verifyingKeys(
  config: Pick<ServiceConfig, 'tokenSigningKey' | 'tokenSigningKeyPrevious'>,
): Promise<CryptoKey[]> {
  if (config.tokenSigningKey === undefined) return [];
  const texts = [config.tokenSigningKey, config.tokenSigningKeyPrevious].filter((text) => text !== undefined);
  return Promise.all(texts.map(hmacKey));
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
  jti: z
    .string()
    .regex(/^[0-9a-f]{32}$/)
    .optional(),
  bud: budgetSchema.optional(),
  iat: z.number().int(),
  nbf: z.number().int().optional(),
  exp: z.number().int(),
});

export interface MintedToken {
  token: string;
  scopes: Scope[];
  session_id: string | null;
  budget: Budget | null;
  expires_at: string;
}

/**
 * Signs a token; `generation` and `incarnation` are the bound session's token generation and
 * incarnation (SessionLog.tokenBinding), ignored unbound. `minter`:
 * the token minting it, when one does (not API_TOKEN): the new token lives no longer than it
 * and, when it has a budget, shares it (its id and expiry, so its spend record), whatever
 * `ttlSeconds` says; a budget of its own is then refused.
 */
export async function mintToken(
  key: CryptoKey,
  request: {
    scopes: Scope[];
    sessionId: string | null;
    generation: number;
    incarnation: string;
    ttlSeconds: number;
    budget?: Budget | undefined;
    minter?: Pick<Principal, 'budget' | 'expires'>;
  },
  now: Date,
): Promise<MintedToken> {
  const scopes = [...new Set(request.scopes)];
  const issuedAt = Math.floor(now.getTime() / 1000);
  const shared = request.minter?.budget ?? null;
  if (shared && request.budget) throw new TokenMintRefused('a token with a budget mints only tokens that share it');
  const latest = shared?.expires ?? request.minter?.expires ?? Number.POSITIVE_INFINITY;
  const exp = shared ? shared.expires : Math.min(issuedAt + request.ttlSeconds, latest);
  const budget = shared
    ? { id: shared.id, limits: shared.limits }
    : request.budget
      ? { id: randomJti(), limits: request.budget }
      : null;
  const payload = {
    scope: scopes.join(' '),
    ...(request.sessionId !== null
      ? { session_id: request.sessionId, gen: request.generation, inc: request.incarnation }
      : {}),
    // A budget's spend is kept under its random id and the token's expiry (lib/ledger/token-spend.ts).
    ...(budget ? { jti: budget.id, bud: budget.limits } : {}),
    iat: issuedAt,
    exp,
  };
  const token = await sign(payload, key, 'HS256');
  return {
    token,
    scopes,
    session_id: request.sessionId,
    budget: budget?.limits ?? null,
    expires_at: new Date(exp * 1000).toISOString(),
  };
}

/**
 * Verifies a token's signature under any of `keys` (the signing key first), then its time
 * claims against `now`: `iat` and `nbf` not ahead of it by more than the clock tolerance,
 * `exp` after it and at most 30 days after `iat`; then its other claims. A token bound to a
 * session must name the session's token generation and incarnation. Throws a TokenRejection
 * saying what failed.
 */
export async function verifyToken(keys: readonly CryptoKey[], token: string, now: Date): Promise<Principal> {
  const payload = await verifiedPayload(keys, token);
  const claims = claimsSchema.safeParse(payload);
  if (!claims.success) throw new TokenRejection('the token is malformed');
  const { iat, nbf, exp } = claims.data;
  const latest = Math.floor(now.getTime() / 1000) + CLOCK_TOLERANCE_SECONDS;
  if (iat > latest) throw new TokenRejection(`the token is issued in the future (${isoTime(iat)})`);
  if (nbf !== undefined && nbf > latest) throw new TokenRejection(`the token is not valid before ${isoTime(nbf)}`);
  if (exp * 1000 <= now.getTime()) throw new TokenRejection(`the token expired at ${isoTime(exp)}`);
  if (exp - iat > MAX_TTL_SECONDS) throw new TokenRejection('the token lifetime exceeds 30 days');
  const { jti, bud } = claims.data;
  // A budget needs the id its spend is kept under, and an id means nothing without a budget.
  if ((jti === undefined) !== (bud === undefined)) throw new TokenRejection('the token is malformed');
  const budget = jti !== undefined && bud !== undefined ? { id: jti, expires: exp, limits: bud } : null;
  const sessionId = claims.data.session_id ?? null;
  const scopes = claims.data.scope;
  if (sessionId === null) return { scopes, sessionId, generation: 0, incarnation: '', budget, expires: exp };
  if (claims.data.gen === undefined || claims.data.inc === undefined)
    throw new TokenRejection('the token is malformed');
  return { scopes, sessionId, generation: claims.data.gen, incarnation: claims.data.inc, budget, expires: exp };
}

function isoTime(seconds: number): string {
  return new Date(seconds * 1000).toISOString();
}

/** The payload of a token whose signature verifies under one of `keys`. */
async function verifiedPayload(keys: readonly CryptoKey[], token: string): Promise<unknown> {
  // A JWT has three dotted parts; a string without a dot is most likely a mistyped API_TOKEN.
  if (!token.includes('.')) throw new TokenRejection('the token is not API_TOKEN, nor a scoped token (a signed JWT)');
  for (const key of keys) {
    try {
      // Time claims are checked by verifyToken against the service clock, after the signature.
      return await verify(token, key, { alg: 'HS256', exp: false, nbf: false, iat: false });
    } catch (error) {
      if (!(error instanceof JwtTokenSignatureMismatched)) throw new TokenRejection('the token is malformed');
    }
  }
  throw new TokenRejection('the token signature does not verify');
}
