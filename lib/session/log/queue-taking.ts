import { z } from 'zod';
import { NotFoundError } from '../../errors.ts';
import { idempotencyKey, queueTakingKey, type LogScope } from '../keys.ts';
import { parseStoredOrUndefined } from '../records.ts';
import type { QueuedInput } from '../queued-input.ts';
import { sessionScope } from './config-object.ts';
import { readNewest } from './head.ts';
import type { LogContext } from './context.ts';

/**
 * Which queued input a pickup marked last (`queue_taking/<g>/latest`, docs/STORAGE.md "Queued
 * inputs"). A pickup's mark (`taking_at`, log/queue-withdraw.ts) rewrites the oldest entry, so
 * its upload time moves behind the inputs queued after it: a listing ordered by upload time
 * alone would put the next input first, and a second pickup listing between the mark and its
 * turn's record would claim that one, whose record could land first. So the pickup names the
 * entry here before marking it, and a listing puts the entry named back first while it stands
 * marked by the writer named (an input queued again under its key since is another input).
 */
const takingSchema = z.object({ key_sha256: z.string(), writer: z.string() }).strict();

/** Names the entry `keyHash` queued by `writer` as the one a pickup marks next (before its mark). */
export async function nameTaking(log: LogContext, scope: LogScope, keyHash: string, writer: string): Promise<void> {
  const body = JSON.stringify({ key_sha256: keyHash, writer });
  await log.store.put(queueTakingKey(scope), body, { contentType: 'application/json' });
}

/**
 * For a pickup whose mark found the entry it named gone: a delete of the session may have
 * removed it, its sweep passing `queue_taking/` before the name landed. The name goes then,
 * while the session names the generation no more (its id gone, or created again). One get of
 * the config, paid by such a mark only; a failure keeps the name (the next delete of the id
 * removes it).
 */
export async function forgetTakingIfDeleted(log: LogContext, scope: LogScope): Promise<void> {
  try {
    const current = await sessionScope(log, scope.id).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    });
    if (current && [current.generation, ...(current.queuedIn ?? [])].includes(scope.generation)) return;
    await log.store.delete(queueTakingKey(scope));
  } catch {
    // Left for the next delete of this id.
  }
}

/**
 * `ordered` (oldest first by upload time) with the entry each generation names as marked moved
 * to the front, `named` set on it: a get of each generation's name when two entries or more are
 * listed, and a read (`read`) of an entry named behind another. One named at the front is not
 * read: it may be unmarked (its pickup stopped before its mark), or marked and its turn running.
 */
export async function takingFirst<Entry extends { keyHash: string; generation: string; named?: boolean }>(
  log: LogContext,
  scope: LogScope,
  ordered: Entry[],
  read: (entry: Entry) => Promise<QueuedInput | null>,
): Promise<Entry[]> {
  if (ordered.length < 2) return ordered;
  const generations = [...new Set(ordered.map((entry) => entry.generation))];
  // The place in `ordered` of the entry each generation names, when it goes first (else -1).
  const named = await Promise.all(
    generations.map(async (generation) => {
      const object = await log.store.get(queueTakingKey({ ...scope, generation }));
      // One not readable names nothing: the listing keeps the upload order.
      const taking = object ? parseStoredOrUndefined(object.body, takingSchema) : undefined;
      if (!taking) return -1;
      const at = ordered.findIndex((one) => one.generation === generation && one.keyHash === taking.key_sha256);
      if (at <= 0) return at;
      const input = await read(ordered[at]!);
      return input?.writer === taking.writer && input.taking_at !== undefined ? at : -1;
    }),
  );
  const first = ordered.filter((_, at) => named.includes(at)).map((entry) => ({ ...entry, named: true }));
  return first.length === 0 ? ordered : [...first, ...ordered.filter((_, at) => !named.includes(at))];
}

/**
 * Whether the queued input `input` (listed as `entry`) is taken up: marked by a pickup
 * (`taking_at`) whose turn is stored, its key indexed (`idem/`, in the session's generation or
 * the entry's), or, where its claim could not index it, the session's newest record (the turn
 * runs, and its completion indexes the key). A mark whose claim stored nothing (its record's put
 * lost to another writer's, its process died) leaves the input to the next pickup, which runs it
 * first: it still waits. For a marked input only: a head of each generation, and when they find
 * no key, the newest record read (`newestKey`: a caller asking for several reads it once).
 */
export async function takenUp(
  log: LogContext,
  scope: LogScope,
  entry: { keyHash: string; generation: string },
  input: QueuedInput,
  newestKey: () => Promise<string | undefined> = () => newestKeyHash(log, scope),
): Promise<boolean> {
  if (input.taking_at === undefined) return false;
  const generations = [...new Set([scope.generation, entry.generation])];
  const claims = await Promise.all(
    generations.map((generation) => log.store.head(idempotencyKey({ ...scope, generation }, entry.keyHash))),
  );
  if (claims.some((claim) => claim !== null)) return true;
  return (await newestKey()) === entry.keyHash;
}

/** The key hash of the session's newest record (a listing of its head, a get), when keyed. */
export async function newestKeyHash(log: LogContext, scope: LogScope): Promise<string | undefined> {
  const { newest } = await readNewest(log, scope);
  return newest?.record.idempotency_key_sha256;
}
