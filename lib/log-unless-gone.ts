import { NotFoundError } from './errors.ts';

/**
 * Logs `message` with `error`, a failure of work done after a response (an index write, say),
 * unless that work found its session or turn gone (NotFoundError): deleted meanwhile, it has
 * nothing left to do, and that race is no failure.
 */
export function logUnlessGone(
  log: (message: string, details?: unknown) => void,
  message: string,
  error: unknown,
): void {
  if (!(error instanceof NotFoundError)) log(message, error);
}
