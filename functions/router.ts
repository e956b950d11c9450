import { OpenAPIHono } from '@hono/zod-openapi';
import type { ServiceConfig } from '../lib/config.ts';
import type { AppServices } from './services.ts';
import type { Principal, Scope } from './tokens.ts';
import { validationHook } from './error-handler.ts';

/** The raw runtime environment of a request: bindings, vars and secrets as one object. */
export type RuntimeEnvironment = Record<string, unknown>;

/** What the matched route asks of a token: its declared scope, and the session in its path. */
export interface RouteAccess {
  /** `METHOD /path/:param`, as the route was registered. */
  route: string;
  /** Null: any valid token, whatever its scopes (functions/tokens.ts anyToken). */
  scope: Scope | null;
  /** The `:id` of a `/v1/sessions/:id[/...]` route, the session of a conversation or response id (null elsewhere). */
  sessionId: string | null;
  /**
   * The session is in the request body or a header (POST /v1/responses, chat completions,
   * new conversations): the handler checks a bound token with `authorizeSession`.
   */
  deferred?: true;
}

export interface AppVariables {
  /** The request's id: its response's `x-request-id`, in its log lines (functions/request-id.ts). */
  requestId: string;
  config: ServiceConfig;
  services: AppServices;
  /** Who the request acts as (set by auth). */
  principal: Principal;
  /** What the matched route asks of a token (set by auth). */
  access: RouteAccess;
  /**
   * A response naming no session: counts one turn under the limit of the session its resent
   * history goes on in, once found (429 over it; functions/rate-limit.ts).
   */
  takeSessionTurn?: (sessionId: string) => Promise<void>;
}

export interface AppEnv {
  Bindings: RuntimeEnvironment;
  Variables: AppVariables;
}

/** A router with the shared validation hook (a failed validation is a 400 naming the field). */
export function createRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
}
