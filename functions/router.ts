import { OpenAPIHono } from '@hono/zod-openapi';
import type { ServiceConfig } from '../lib/config.ts';
import type { RouteAccess } from './auth.ts';
import type { AppServices } from './services.ts';
import type { Principal } from './tokens.ts';
import { validationHook } from './error-handler.ts';

/** The raw runtime environment of a request: bindings, vars and secrets as one object. */
export type RuntimeEnvironment = Record<string, unknown>;

export interface AppVariables {
  config: ServiceConfig;
  services: AppServices;
  /** Who the request acts as (set by auth). */
  principal: Principal;
  /** What the matched route asks of a token (set by auth). */
  access: RouteAccess;
}

export interface AppEnv {
  Bindings: RuntimeEnvironment;
  Variables: AppVariables;
}

/** A router with the shared validation hook (a failed validation is a 400 naming the field). */
export function createRouter(): OpenAPIHono<AppEnv> {
  return new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
}
