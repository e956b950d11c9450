import type { Context, MiddlewareHandler } from 'hono';
import { NotFoundError, RateLimitedError } from '../lib/errors.ts';
import { SessionDeletedError } from '../lib/session-deleted.ts';
import { sha256Hex } from '../lib/hash.ts';
import { idSchema } from '../lib/items.ts';
import { decodeBase64 } from '../lib/media.ts';
import { OpenAIApiError } from '../lib/openai/errors.ts';
import { parseResponseId } from '../lib/openai/ids.ts';
import type { Model } from '../lib/models/model.ts';
import { authorizeSession } from './auth.ts';
import type { AppEnv, RuntimeEnvironment } from './router.ts';

/**
 * Turns per minute per session and per token (docs/API.md, "Rate limits"). The turn-taking
 * routes (POST /v1/sessions/{id}/turns, POST /v1/responses, POST /v1/chat/completions, the
 * compactions) count one turn under the session's key and one under the token's, after auth and
 * before anything is stored (or read, but a bound token's session config where a limit is
 * set); over either limit the request is 429 `rate_limited` with Retry-After.
 *
 * On Workers the counters are the platform's Rate Limiting bindings (`TURN_LIMIT_PER_SESSION`,
 * `TURN_LIMIT_PER_TOKEN` in wrangler.toml, period 60 s), shared by the isolates of a location.
 * Everywhere else, and on Workers without the bindings, RATE_LIMIT_TURNS_PER_MINUTE_PER_SESSION
 * and ..._PER_TOKEN drive an in-process sliding window: each process counts on its own.
 */

export type LimitKind = 'session' | 'token';

/**
 * One limit: `take` counts one turn under `key` and answers the seconds to wait when it is over
 * the limit, else null; `perMinute` is the limit's number, null when a Workers binding holds it.
 */
export interface TurnLimit {
  take(key: string): Promise<number | null>;
  perMinute: number | null;
  /** Takes back the turn this limit's `take` counted under `key` (the in-process limiter only). */
  giveBack?: (key: string) => void;
}

/** The Workers binding's interface (its `limit()` answers `{success}`). */
interface RateLimitBinding {
  limit(options: { key: string }): Promise<{ success: boolean }>;
}

/** The binding name of each limit on Workers. */
const BINDINGS: Record<LimitKind, string> = { session: 'TURN_LIMIT_PER_SESSION', token: 'TURN_LIMIT_PER_TOKEN' };

/** Where a limit reports a failure of its own (the app's log). */
type LimitLog = (message: string, details?: unknown) => void;

/**
 * The binding of `kind` in a Workers environment, if one is bound. A binding that fails lets the
 * turn through, logged as an error: the limit guards against a runaway client, and the platform
 * documents no failure of its own to answer for with a 5xx.
 */
export function bindingLimit(environment: RuntimeEnvironment, kind: LimitKind, log: LimitLog): TurnLimit | undefined {
  const name = BINDINGS[kind];
  const binding = environment[name] as RateLimitBinding | undefined;
  if (typeof binding?.limit !== 'function') return undefined;
  // The binding says nothing of when its window frees up: a whole period (60 s) is always enough.
  return {
    take: async (key) => {
      try {
        return (await binding.limit({ key })).success ? null : WINDOW_MS / 1000;
      } catch (error) {
        log(`rate limit: the ${name} binding failed; the turn goes on unlimited by it`, error);
        return null;
      }
    },
    perMinute: null,
  };
}

const WINDOW_MS = 60_000;
/** Above this many keys, keys whose turns are all older than the window are dropped. */
const SWEEP_AT_KEYS = 10_000;

/**
 * A sliding window of one minute per key, in this process: the times of the turns counted in
 * the last minute. Over `perMinute`, the wait is until the oldest of them leaves the window.
 */
export class WindowLimiter {
  private readonly turns = new Map<string, number[]>();
  private readonly clock: () => Date;
  /**
   * Past SWEEP_AT_KEYS keys, a take sweeps when the keys have doubled since the last sweep or a
   * window has passed since it: keys that stay in the window are not looked over on every take
   * (a token naming a new session id on each turn adds one), and the sweeps cost O(1) a take.
   */
  private sweepAt = SWEEP_AT_KEYS;
  private sweptAt = Number.NEGATIVE_INFINITY;
  private scannedKeys = 0;

  constructor(clock: () => Date = () => new Date()) {
    this.clock = clock;
  }

  take(key: string, perMinute: number): number | null {
    return this.takeTimed(key, perMinute).wait;
  }

  /** `take`, and the time the turn was counted at (`at`), which `giveBack` names. */
  takeTimed(key: string, perMinute: number): { wait: number | null; at: number } {
    const now = this.clock().getTime();
    const size = this.turns.size;
    if (size > SWEEP_AT_KEYS && (size > this.sweepAt || now - this.sweptAt >= WINDOW_MS)) this.sweep(now);
    const times = (this.turns.get(key) ?? []).filter((time) => time > now - WINDOW_MS);
    if (times.length >= perMinute) {
      this.turns.set(key, times);
      return { wait: Math.max(1, Math.ceil((times[times.length - perMinute]! + WINDOW_MS - now) / 1000)), at: now };
    }
    times.push(now);
    this.turns.set(key, times);
    return { wait: null, at: now };
  }

  /**
   * Takes back the turn counted under `key` at `at` (takeTimed), by a request whose session does
   * not exist: not another request's, and nothing once the window let it go. A key left without
   * turns goes, so made-up session ids keep no key.
   */
  giveBack(key: string, at: number): void {
    const times = this.turns.get(key);
    const index = times?.lastIndexOf(at) ?? -1;
    if (index >= 0) times!.splice(index, 1);
    if (times?.length === 0) this.turns.delete(key);
  }

  /** The keys held now (for tests). */
  size(): number {
    return this.turns.size;
  }

  /** The keys the sweeps have looked at so far (for tests). */
  scanned(): number {
    return this.scannedKeys;
  }

  private sweep(now: number): void {
    this.scannedKeys += this.turns.size;
    for (const [key, times] of this.turns) if (times.every((time) => time <= now - WINDOW_MS)) this.turns.delete(key);
    this.sweepAt = 2 * this.turns.size;
    this.sweptAt = now;
  }
}

/** Chooses each request's limits (a new one each call): the Workers bindings, else the settings over `limiter`. */
export type TurnLimits = (c: Context<AppEnv>, kind: LimitKind) => TurnLimit | undefined;

/** The in-process limits of the settings, with the bindings first when `environment` has them. */
export function turnLimits(
  limiter: WindowLimiter,
  readEnvironment: (c: Context) => RuntimeEnvironment,
  log: LimitLog,
): TurnLimits {
  return (c, kind) => {
    const bound = bindingLimit(readEnvironment(c), kind, (message, details) =>
      log(`${message} (${c.var.requestId})`, details),
    );
    if (bound) return bound;
    const perMinute = c.get('config').turnsPerMinute[kind];
    if (perMinute === null) return undefined;
    // One limit a request: it gives back the turn its own take counted.
    let counted: number | undefined;
    return {
      take: async (key) => {
        const { wait, at } = limiter.takeTimed(key, perMinute);
        if (wait === null) counted = at;
        return wait;
      },
      perMinute,
      giveBack: (key) => {
        if (counted !== undefined) limiter.giveBack(key, counted);
        counted = undefined;
      },
    };
  };
}

/** A native turn or compaction: both call a model. */
const NATIVE_TURN = /^\/v1\/sessions\/([^/]+)\/(?:turns|compact)$/;
const CHAT_COMPLETIONS = '/v1/chat/completions';
const RESPONSES = '/v1/responses';
const FACADE_TURNS: ReadonlySet<string> = new Set([RESPONSES, '/v1/responses/compact', CHAT_COMPLETIONS]);

/**
 * The session a turn-taking request acts on (null: none is named, e.g. a new response, a
 * compaction of inline input or a chat completion without `x-tailgate-session`, or what it
 * names is no session id, which its route refuses: a name of any length, up to a whole body,
 * is never kept as a key); undefined when the request takes no turn. A compaction counts as a
 * turn: it calls a model too, and a token's stateless ones would otherwise run at once unlimited
 * (docs/SECURITY.md, "Token budgets").
 */
async function turnSession(c: Context<AppEnv>): Promise<string | null | undefined> {
  const named = await namedSession(c);
  return typeof named === 'string' && !idSchema.safeParse(named).success ? null : named;
}

/** What turnSession reads, before it is checked to be a session id. */
async function namedSession(c: Context<AppEnv>): Promise<string | null | undefined> {
  if (c.req.method !== 'POST') return undefined;
  const native = NATIVE_TURN.exec(c.req.path);
  // A segment that is not valid percent-encoding is kept as it came: the route answers it 400.
  if (native) return decodedSegment(native[1]!);
  if (!FACADE_TURNS.has(c.req.path)) return undefined;
  // A chat completion acts on the session whose inbox it delivers (its header), if any.
  if (c.req.path === CHAT_COMPLETIONS) return c.req.header('x-tailgate-session') || null;
  const body = (await c.req.json().catch(() => null)) as Record<string, unknown> | null;
  const conversation = body?.conversation;
  if (typeof conversation === 'string') return conversation;
  if (typeof (conversation as { id?: unknown } | undefined)?.id === 'string')
    return (conversation as { id: string }).id;
  const previous = body?.previous_response_id;
  return typeof previous === 'string' ? (parseResponseId(previous)?.sessionId ?? null) : null;
}

/**
 * The token's key: a hash of what the bearer token says (an anonymous request has none). A
 * signed token counts by its decoded claims, not its text: base64 lets the last character of a
 * segment be spelled several ways, and a verifier reading them leniently takes every spelling.
 * A token with a budget counts by its budget's id (`jti`), which the tokens it mints share
 * (functions/tokens.ts): minting more tokens does not multiply its limit, which bounds how far
 * its turns run at once can pass the budget (docs/SECURITY.md, "Token budgets").
 */
function tokenKey(c: Context<AppEnv>): string {
  const config = c.get('config');
  // Anonymous access (functions/auth.ts) takes every request, whatever its header: one key.
  if (config.apiToken === undefined && config.allowAnonymous) return 'token:anonymous';
  const token = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization') ?? '')?.[1]?.trim();
  if (!token) return 'token:anonymous';
  const segments = token.split('.');
  const claims =
    segments.length === 3
      ? decodeBase64(segments[1]!.replaceAll('-', '+').replaceAll('_', '/').replace(/=+$/, ''))
      : undefined;
  const budget = claims && budgetId(claims);
  if (budget) return `token:budget:${budget}`;
  return `token:${sha256Hex(claims ?? token).slice(0, 32)}`;
}

/** The `jti` of a token's claims (auth verified them: only a budgeted token has one), or null. */
function budgetId(claims: Uint8Array): string | null {
  try {
    const jti = (JSON.parse(new TextDecoder().decode(claims)) as { jti?: unknown }).jti;
    return typeof jti === 'string' ? jti : null;
  } catch {
    return null;
  }
}

/**
 * The middleware (after auth, the body checks and the services): counts each turn under both
 * limits. A token that may not act on the session named is refused before it counts under
 * either: bound to another or naming none (403; a response naming none may continue the token's
 * session, which its history finds), or bound to it (or naming none) but revoked, or minted for a
 * deleted session of its id (401), which either limit reads the session's config (the one named,
 * else the token's own) once more to tell (the route reads it again, and refuses what was written
 * meanwhile: a revocation, the session deleted and created again). Its requests, which the route
 * refuses anyway, must not spend a limit: a revoked token would keep the session's own clients,
 * or the other tokens of its budget, out. A request the session's limit refuses gives its token's
 * turn back (in process): a client retrying a busy session keeps its token's turns for the others.
 */
export function rateLimit(limits: TurnLimits, refused: (kind: LimitKind) => void): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const session = await turnSession(c);
    if (session === undefined) return next();
    const bound = c.var.principal.sessionId;
    // A bound token naming no session is refused by its route anyway (functions/auth.ts), but for
    // a response, which may continue its session found by the history the request sends.
    if (session !== null || c.req.path !== RESPONSES)
      authorizeSession(c, session, c.req.path === CHAT_COMPLETIONS ? 'x-tailgate-session' : undefined);
    const token: [LimitKind, string, TurnLimit | undefined] = ['token', tokenKey(c), limits(c, 'token')];
    const checks = [token];
    if (session !== null) checks.push(['session', `session:${session}`, limits(c, 'session')]);
    // The revocation check (functions/auth.ts revocationCheck) runs on this read of the config (the
    // session named, else the token's own), before either limit counts: a token's limit is shared
    // by the tokens of its budget too.
    // The token's own session gone (deleted): its route refuses the response as bound elsewhere.
    if (bound !== null && checks.some(([, , limit]) => limit))
      await c.var.services.sessions.tokenBinding(session ?? bound).catch((error: unknown) => {
        if (session === null && error instanceof NotFoundError) authorizeSession(c, null);
        throw error;
      });
    const take = async (kind: LimitKind, key: string, limit: TurnLimit | undefined) => {
      const wait = limit ? await limit.take(key) : null;
      if (wait === null) return;
      // Refused, the request takes no turn: its token's count goes too (the in-process limiter's).
      if (kind === 'session') token[2]?.giveBack?.(token[1]);
      refused(kind);
      c.header('Retry-After', String(wait));
      throw new RateLimitedError(kind, limit!.perMinute, wait);
    };
    for (const [kind, key, limit] of checks) await take(kind, key, limit);
    // A response naming none may go on in the conversation whose whole history it resends (a
    // client's tool loop): that session's limit counts it once the route found it.
    if (session === null && c.req.path === RESPONSES)
      c.set('takeSessionTurn', (id) => take('session', `session:${id}`, limits(c, 'session')));
    const counted = checks.find(([kind]) => kind === 'session');
    const called = counted?.[2]?.giveBack ? noteModelCalls(c) : () => true;
    await next();
    // A session that does not exist takes no turn: its count goes, and an unbound token naming a
    // new made-up id on every request leaves no key behind. Not once a model was called (the
    // session deleted meanwhile): that turn was taken, and its call may cost.
    if (counted && !called() && namesNothing(c.error, session!)) counted[2]?.giveBack?.(counted[1]);
  };
}

/**
 * Has the request's services note each call of a model they resolve; answers whether one was made.
 */
function noteModelCalls(c: Context<AppEnv>): () => boolean {
  let called = false;
  const services = c.var.services;
  const resolve = services.model;
  const noted = (id: string): Model => {
    const model = resolve(id);
    return {
      ...model,
      generate: (request) => {
        called = true;
        return model.generate(request);
      },
      stream: (request) => {
        called = true;
        return model.stream(request);
      },
    };
  };
  c.set('services', { ...services, model: noted });
  return () => called;
}

/** The params of the OpenAI-compatible routes' 404 for a session named that does not exist. */
const SESSION_PARAMS: ReadonlySet<string | null> = new Set(['conversation', 'conversation_id', 'x-tailgate-session']);

/**
 * Whether `error` refused a turn because the session `id` it names does not exist (404; its
 * `details.turn` names a turn an existing one lacks; on the OpenAI-compatible routes the 404 of
 * its `conversation` or `x-tailgate-session`), or the response it continues (400
 * previous_response_not_found). Not a session deleted while its turn ran: that turn was taken.
 */
function namesNothing(error: unknown, id: string): boolean {
  if (error instanceof OpenAIApiError)
    return error.code === 'previous_response_not_found' || (error.status === 404 && SESSION_PARAMS.has(error.param));
  const missing = error instanceof NotFoundError && !(error instanceof SessionDeletedError);
  const details = missing ? (error.details as { id?: unknown; turn?: unknown }) : undefined;
  return details?.id === id && details.turn === undefined;
}

/** `segment` percent-decoded, or as it is when it is not valid percent-encoding. */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
