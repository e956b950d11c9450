import type { MiddlewareHandler } from 'hono';
import { TailgateError } from '../lib/errors.ts';
import { sha256Hex } from '../lib/hash.ts';
import { NotConfiguredError, type ServiceConfig } from '../lib/config.ts';

/** A missing or wrong bearer token (401). */
export class UnauthorizedError extends TailgateError {
  constructor(message: string) {
    super('unauthorized', message);
    this.name = 'UnauthorizedError';
  }
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

/**
 * Bearer auth from API.md: with a token configured, a missing or wrong one gets 401. With no
 * token configured the service refuses (503 not_configured) unless ALLOW_ANONYMOUS is true.
 */
export function bearerAuth(options: { config: (c: Parameters<MiddlewareHandler>[0]) => ServiceConfig }): MiddlewareHandler {
  return async (c, next) => {
    const config = options.config(c);
    if (config.apiToken === undefined) {
      if (config.allowAnonymous) return next();
      throw new NotConfiguredError('no API_TOKEN is configured; set one (or ALLOW_ANONYMOUS=true for local development)');
    }
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer[ \t]+(\S+)\s*$/i.exec(header);
    if (!match) {
      c.header('WWW-Authenticate', 'Bearer');
      throw new UnauthorizedError('missing bearer token');
    }
    if (!constantTimeEqual(match[1]!, config.apiToken)) {
      c.header('WWW-Authenticate', 'Bearer error="invalid_token"');
      throw new UnauthorizedError('invalid bearer token');
    }
    return next();
  };
}
