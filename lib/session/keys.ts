import { InvalidRequestError } from '../errors.ts';
import { idSchema } from '../items.ts';

/**
 * Object keys of a session. Every key is built from an id validated with `idSchema`, so no
 * caller-supplied text can escape the session's prefix (no `/`, no `..`).
 *
 * Layout under `<keyPrefix>sessions/<id>/`:
 * - `session.json`: the config (create-only; changed only by update, with If-Match).
 * - `turn/<inverted turn>`: a turn or append record (create-only, the commit point).
 * - `turn/<inverted turn>.done`: the completion of a model turn (create-only).
 * - `seg/<inverted last turn>-<first turn>`: immutable packed segments of old turns.
 * - `blob/<sha256>`: payloads above the out-of-line threshold.
 * - `idem/<sha256 of the idempotency key>`: the turn that owns an idempotency key.
 * - `calls/<call key>`: a marker per distinct call key (create-only; a taken key = seen).
 * - `inbox/`, `inbox_removed/`: owned by lib/inbox/.
 */

/** Validates an id and returns it; throws InvalidRequestError for anything else. */
export function validateId(id: string): string {
  const parsed = idSchema.safeParse(id);
  if (!parsed.success) throw new InvalidRequestError(`invalid session id: ${parsed.error.issues[0]?.message ?? 'bad id'}`);
  return parsed.data;
}

/** `<keyPrefix>sessions/<id>/`: every object of the session lives under it. */
export function sessionPrefix(keyPrefix: string, id: string): string {
  return `${keyPrefix}sessions/${validateId(id)}/`;
}

/** `<keyPrefix>sessions/<id>/session.json`: its presence means the session exists. */
export function sessionConfigKey(keyPrefix: string, id: string): string {
  return `${sessionPrefix(keyPrefix, id)}session.json`;
}
