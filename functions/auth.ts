import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import { TailgateError, NotConfiguredError } from '../lib/errors.ts';
import { sha256Hex } from '../lib/hash.ts';
import type { ServiceConfig } from '../lib/config.ts';
import type { SessionConfig } from '../lib/session/records.ts';
import { parseResponseId } from '../lib/openai/ids.ts';
import { refuseBrowserReach } from './anonymous-access.ts';
import type { AppEnv, RouteAccess } from './router.ts';
import {
  ADMIN,
  grants,
  scopeSchema,
  TokenRejection,
  verifyingKeys,
  verifyToken,
  type Principal,
  type Scope,
} from './tokens.ts';

/** A refused request: `challenge` is its WWW-Authenticate header (RFC 6750). */
abstract class AuthError extends TailgateError {
  readonly challenge: string;

  constructor(code: 'unauthorized' | 'forbidden', message: string, challenge: string, details?: unknown) {
    super(code, message, details);
    this.challenge = challenge;
  }
}

/** A missing, wrong, malformed, expired or revoked bearer token (401). */
export class UnauthorizedError extends AuthError {
  constructor(message: string, challenge = 'Bearer') {
    super('unauthorized', message, challenge);
    this.name = 'UnauthorizedError';
  }
}

/** A valid token without the scope, or for another session (403). */
export class ForbiddenError extends AuthError {
  constructor(message: string, challenge: string, details: unknown) {
    super('forbidden', message, challenge, details);
    this.name = 'ForbiddenError';
  }
}

function invalidToken(description: string): UnauthorizedError {
  return new UnauthorizedError(
    `invalid bearer token: ${description}`,
    `Bearer error="invalid_token", error_description="${description}"`,
  );
}

/**
 * Compares two strings in time that depends on neither their content nor where they differ:
 * both are hashed first, so even their lengths do not leak.
 */
export function constantTimeEqual(left: string, right: string): boolean {
  const a = sha256Hex(left);
  const b = sha256Hex(right);
  let difference = 0;
  for (let index = 0; index < a.length; index++) difference |= a.charCodeAt(index) ^ b.charCodeAt(index);
  return difference === 0;
}

/** `METHOD /path/:param` -> the scope its createRoute `security` declares (null: any token). */
export type ScopeTable = ReadonlyMap<string, Scope | null>;

/**
 * The scope table of every route registered with a `security` that names a scope, or a bearer
 * with none (anyToken: any valid token).
 */
export function declaredScopes(app: OpenAPIHono<AppEnv>): ScopeTable {
  const table = new Map<string, Scope | null>();
  for (const definition of app.openAPIRegistry.definitions) {
    if (definition.type !== 'route') continue;
    const bearer = definition.route.security?.[0]?.bearer;
    const scope = scopeSchema.safeParse(bearer?.[0]);
    const key = `${definition.route.method.toUpperCase()} ${definition.route.path.replaceAll(/\{(.+?)\}/g, ':$1')}`;
    if (scope.success) table.set(key, scope.data);
    else if (bearer?.length === 0) table.set(key, null);
  }
  return table;
}

const SESSION_ROUTE = /^\/v1\/sessions\/:id(\/|$)/;
/** OpenAI-compatible routes whose `:id` names a session: a conversation id is a session id. */
const CONVERSATION_ROUTE = /^\/v1\/conversations\/:id(\/|$)/;
const RESPONSE_ROUTE = /^\/v1\/responses\/:id(\/|$)/;
/** OpenAI-compatible routes whose session (if any) is named in the request, not the path. */
const DEFERRED_ROUTES: ReadonlySet<string> = new Set([
  'POST /v1/responses',
  'POST /v1/responses/compact',
  // A count of a conversation's next turn names it in the body, as a response does.
  'POST /v1/responses/input_tokens',
  'POST /v1/chat/completions',
  'POST /v1/conversations',
  // The model list names no session: any token with session:read may read it.
  'GET /v1/models',
  'GET /v1/models/:id',
  // Names no session: any token reads what applies to itself, bound or not.
  'GET /v1/tokens/current',
]);

/** The matched route's access; a route without a declared scope needs `admin`. */
function routeAccess(c: Context, table: ScopeTable): RouteAccess {
  const matched = matchedRoutes(c).find((route) => route.method !== 'ALL');
  const route = matched ? `${matched.method} ${matched.path}` : `${c.req.method} ${c.req.path}`;
  let sessionId: string | null = null;
  if (
    matched &&
    (SESSION_ROUTE.test(matched.path) || CONVERSATION_ROUTE.test(matched.path) || RESPONSE_ROUTE.test(matched.path))
  ) {
    const segment = c.req.path.split('/')[3] ?? '';
    try {
      sessionId = decodeURIComponent(segment);
    } catch {
      sessionId = segment;
    }
    // A response id names its session; one that is not a response id names none of them.
    if (RESPONSE_ROUTE.test(matched.path)) sessionId = parseResponseId(sessionId)?.sessionId ?? '';
  }
  const declared = table.get(route);
  const scope = declared === undefined ? 'admin' : declared;
  return DEFERRED_ROUTES.has(route) ? { route, scope, sessionId, deferred: true } : { route, scope, sessionId };
}

/**
 * For the routes whose session is named in the request (`RouteAccess.deferred`): 403 unless
 * the token may act on `sessionId` (null: the request starts a new session or touches none,
 * which a token bound to a session may not do). `header`: the request header that names the
 * session where the request may name one so (the refusal tells a bound token to send it).
 */
export function authorizeSession(c: Context<AppEnv>, sessionId: string | null, header?: string): void {
  const bound = c.var.principal.sessionId;
  if (bound === null || sessionId === bound) return;
  const message =
    sessionId !== null
      ? `this token is bound to session ${bound}, not ${sessionId}`
      : header !== undefined
        ? `this token is bound to session ${bound}: send ${header}: ${bound} (without it no session is touched)`
        : `this token is bound to session ${bound} and cannot start or use another one`;
  throw new ForbiddenError(message, 'Bearer error="insufficient_scope"', { session_id: bound });
}

/** 403 unless `principal` may use the route: the scope first, then the session binding. */
function authorize(principal: Principal, access: RouteAccess): void {
  if (!grants(principal.scopes, access.scope)) {
    throw new ForbiddenError(
      `this token lacks the scope ${access.scope} that ${access.route} requires`,
      `Bearer error="insufficient_scope", scope="${access.scope}"`,
      {
        required_scope: access.scope,
      },
    );
  }
  const bound = principal.sessionId;
  if (bound !== null && !access.deferred && access.sessionId !== bound) {
    const message =
      access.sessionId === null
        ? `this token is bound to session ${bound} and works only on its routes`
        : `this token is bound to session ${bound}, not ${access.sessionId}`;
    throw new ForbiddenError(message, 'Bearer error="insufficient_scope"', { session_id: bound });
  }
}

/** Where the operator sets what a deployment without a token lacks: a Worker's, or a Node or Deno server's. */
export type TokenSetting = 'workers' | 'server';

const HOW_TO_SET_A_TOKEN: Record<TokenSetting, string> = {
  workers:
    'set one as a secret (`npx wrangler secret put API_TOKEN --env=""`; under wrangler dev, ' +
    '`--var API_TOKEN:<token>`), or ALLOW_ANONYMOUS=true in [vars] for local development ' +
    '(`npm start` runs [env.local], which sets it)',
  server:
    'set one in the environment (or ALLOW_ANONYMOUS=true, the --allow-anonymous flag of the Node and Deno ' +
    'servers, for local development)',
};

/**
 * Whether a request needs a bearer token under `config`: not when anonymous access lets every
 * request in, nor when no token could be accepted (every request is a 503 `not_configured`).
 * What `authenticate` decides first; the inspector's page reads it to ask for a token up front.
 */
export function needsToken(config: ServiceConfig): boolean {
  if (config.apiToken !== undefined) return true;
  return !config.allowAnonymous && config.tokenSigningKey !== undefined;
}

async function authenticate(
  c: Context,
  config: ServiceConfig,
  now: Date,
  tokenSetting: TokenSetting,
): Promise<Principal> {
  if (config.apiToken === undefined) {
    if (config.allowAnonymous) {
      refuseBrowserReach(c, config);
      return ADMIN;
    }
    if (config.tokenSigningKey === undefined) {
      throw new NotConfiguredError(
        `no API_TOKEN or TOKEN_SIGNING_KEY is configured; ${HOW_TO_SET_A_TOKEN[tokenSetting]}`,
        { variables: ['API_TOKEN', 'TOKEN_SIGNING_KEY'] },
      );
    }
  }
  const match = /^Bearer[ \t]+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
  if (!match) throw new UnauthorizedError('missing bearer token');
  const token = match[1]!;
  if (config.apiToken !== undefined && constantTimeEqual(token, config.apiToken)) return ADMIN;
  const keys = await verifyingKeys(config);
  if (keys.length === 0)
    throw invalidToken('the token is not API_TOKEN, and no TOKEN_SIGNING_KEY verifies scoped tokens');
  try {
    return await verifyToken(keys, token, now);
  } catch (error) {
    if (error instanceof TokenRejection) throw invalidToken(error.description);
    throw error;
  }
}

/**
 * Bearer auth: API_TOKEN (the admin token) or a scoped token (functions/tokens.ts), checked
 * against the scope the matched route declares (createRoute's `security`, the same
 * declaration /openapi.json publishes). A missing or invalid token is 401; without API_TOKEN
 * and TOKEN_SIGNING_KEY the service refuses (503 not_configured) unless ALLOW_ANONYMOUS is
 * true. Refusals carry a WWW-Authenticate challenge, also when a later step refuses a revoked
 * token. Sets `principal` and `access`.
 */
export function bearerAuth(options: {
  config: (c: Context<AppEnv>) => ServiceConfig;
  scopes: () => ScopeTable;
  clock: () => Date;
  /** What the 503 of a deployment without a token tells to do (default: a Node or Deno server's). */
  tokenSetting?: TokenSetting;
}): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    try {
      const principal = await authenticate(c, options.config(c), options.clock(), options.tokenSetting ?? 'server');
      const access = routeAccess(c, options.scopes());
      authorize(principal, access);
      c.set('principal', principal);
      c.set('access', access);
    } catch (error) {
      if (error instanceof AuthError) c.header('WWW-Authenticate', error.challenge);
      throw error;
    }
    await next();
    if (c.error instanceof AuthError) c.header('WWW-Authenticate', c.error.challenge);
  };
}

/**
 * The revocation check of a token bound to a session, run by the session log on every read
 * of that session's config (lib/session SessionLogOptions.checkConfig). Unbound tokens and
 * API_TOKEN are not revocable: none.
 */
export function revocationCheck(principal: Principal): ((config: SessionConfig) => void) | undefined {
  if (principal.sessionId === null) return undefined;
  return (config) => {
    if (config.id !== principal.sessionId) return;
    if ((config.token_generation ?? 0) > principal.generation) throw invalidToken('the token was revoked');
    if (!sameIncarnation(config, principal.incarnation))
      throw invalidToken(
        'the token was minted for an earlier session with this id, deleted or replaced by an import since: ' +
          'mint a new token',
      );
  };
}

/**
 * Whether a bound token's `inc` names the incarnation `config` is: its `incarnation`, which a
 * delete of the newest turn keeps. A session whose config predates that field had its storage
 * generation named, accepted while the session is on it or on one its deletes of newest turns
 * wrote and still reads.
 */
function sameIncarnation(config: SessionConfig, incarnation: string): boolean {
  if (config.incarnation !== undefined) return incarnation === config.incarnation;
  return incarnation === (config.generation ?? '') || (config.rewound ?? []).includes(incarnation);
}

/**
 * Routes whose handlers read the session's config before they change or return anything, so
 * the revocation check costs them nothing. A turn with an Idempotency-Key may be answered
 * from the stored turn without that read.
 */
const READS_SESSION_CONFIG: Record<string, (c: Context) => boolean> = {
  'GET /v1/sessions/:id': () => true,
  'PATCH /v1/sessions/:id': () => true,
  'POST /v1/sessions/:id/turns': (c) => c.req.header('idempotency-key') === undefined,
  'POST /v1/sessions/:id/items': () => true,
  'GET /v1/sessions/:id/items': () => true,
  'GET /v1/sessions/:id/prompt': () => true,
  'GET /v1/sessions/:id/turns': () => true,
  'GET /v1/sessions/:id/turns/:turn': () => true,
  'GET /v1/sessions/:id/turns/:turn/items': () => true,
  'POST /v1/sessions/:id/compact': () => true,
  'POST /v1/sessions/:id/tokens/revoke': () => true,
};

/**
 * For a token bound to a session, on the routes that do not read the session's config (the
 * inbox, DELETE, any new route): one config read up front, which runs the revocation check.
 */
export const checkRevocation: MiddlewareHandler<AppEnv> = async (c, next) => {
  const access = c.var.access;
  if (c.var.principal.sessionId !== null && access.sessionId !== null && !READS_SESSION_CONFIG[access.route]?.(c)) {
    await c.var.services.sessions.tokenBinding(access.sessionId);
  }
  return next();
};
