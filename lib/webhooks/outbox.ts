import type { SessionLog } from '../session/session-log.ts';
import { decodeUtf8, listAll, mapLimit, type ObjectStore } from '../store/object-store.ts';
import { deliverWebhook, failedAttemptLine, MAX_ATTEMPTS, retryDelaySeconds, type DeliveryOptions } from './deliver.ts';
import { webhookEntrySchema, type WebhookEntry, type WebhookSink } from './events.ts';
import { outboxPrefix, resolveIntent } from './intent.ts';

/**
 * The object-storage outbox of webhook events (Node and Deno; docs/STORAGE.md, "Webhook
 * outbox"): `<KEY_PREFIX>webhooks/outbox/<event id>`, written create-only before a turn's close
 * is answered, rewritten with its attempts after each failed delivery, deleted once delivered;
 * after MAX_ATTEMPTS it moves to `<KEY_PREFIX>webhooks/dead/<event id>`, kept and logged (as
 * its first failure is: deliver.ts `failedAttemptLine`). A
 * process drains it on start and whenever an entry falls due (functions/webhooks.ts), so a
 * restart loses nothing; two processes draining at once may each deliver an entry (at least
 * once: receivers drop repeats by `webhook-id`).
 */

const deadKey = (keyPrefix: string, id: string) => `${keyPrefix}webhooks/dead/${id}`;

/** Entries delivered at once. */
const PARALLEL_DELIVERIES = 4;

/**
 * The sink that stores entries in the outbox, then calls `stored` (a drainer's wake-up). The
 * put replaces the turn's intent (lib/webhooks/intent.ts); another writer of the same event
 * writes the same id, and one that finds it delivered and deleted sends it once more.
 */
export function outboxSink(store: ObjectStore, keyPrefix: string, stored?: () => void): WebhookSink {
  return async (entry) => {
    await store.put(`${outboxPrefix(keyPrefix)}${entry.id}`, JSON.stringify(entry), {
      contentType: 'application/json',
    });
    stored?.();
  };
}

export interface DrainOptions extends Omit<DeliveryOptions, 'now'> {
  store: ObjectStore;
  keyPrefix: string;
  /** The session log whose turns' intents the drainer resolves (without `onClosed`). */
  sessions: SessionLog;
  clock: () => Date;
  log: (message: string, details?: unknown) => void;
}

/**
 * Delivers every entry that is due. Returns the milliseconds until the next one falls due
 * (null when the outbox is empty).
 */
export async function drainOutbox(options: DrainOptions): Promise<number | null> {
  const { store, keyPrefix } = options;
  const listed = await listAll(store, outboxPrefix(keyPrefix));
  // One entry that cannot be resolved or rescheduled does not keep the others: its failure is
  // thrown once every entry had its turn.
  const failures: unknown[] = [];
  const waits = await mapLimit(listed, PARALLEL_DELIVERIES, ({ key }) =>
    drainEntry(options, key).catch((error: unknown) => {
      failures.push(error);
      return null;
    }),
  );
  if (failures.length > 0) throw failures[0];
  const due = waits.filter((wait): wait is number => wait !== null);
  return due.length > 0 ? Math.min(...due) : null;
}

/** One outbox entry's step: the milliseconds until it falls due again, or null. */
async function drainEntry(options: DrainOptions, key: string): Promise<number | null> {
  const { store } = options;
  const object = await store.get(key);
  if (!object) return null;
  const parsed = webhookEntrySchema.safeParse(parseJson(decodeUtf8(object.body)));
  if (!parsed.success) {
    options.log(`tailgate webhooks: ${key} is not an outbox entry; left in place`);
    return null;
  }
  let entry = parsed.data;
  const now = options.clock();
  const wait = Date.parse(entry.next_attempt_at) - now.getTime();
  if (wait > 0) return wait;
  if (entry.intent) {
    const step = await resolveIntent(options.sessions, entry, now);
    if (step === null) {
      await store.delete(key);
      return null;
    }
    if ('retry' in step) return afterFailure(options, key, object.etag, entry, step.retry);
    if ('until' in step) {
      // Refused: the turn's event replaced it meanwhile.
      const next = { ...entry, next_attempt_at: step.until };
      await store.put(key, JSON.stringify(next), { contentType: 'application/json', ifMatch: object.etag });
      return Math.max(1000, Date.parse(step.until) - now.getTime());
    }
    entry = step.entry;
  }
  const failure = await deliverWebhook(entry, { ...options, now });
  if (failure === null) {
    await store.delete(key);
    return null;
  }
  return afterFailure(options, key, object.etag, entry, failure);
}

/** Counts a failed attempt: the entry rescheduled with backoff, or dead-lettered past the last. */
async function afterFailure(
  options: DrainOptions,
  key: string,
  etag: string,
  entry: WebhookEntry,
  failure: string,
): Promise<number | null> {
  const { store, keyPrefix } = options;
  const attempts = entry.attempts + 1;
  const delayMs = retryDelaySeconds(attempts) * 1000;
  const next: WebhookEntry = {
    ...entry,
    attempts,
    last_error: failure,
    next_attempt_at: new Date(options.clock().getTime() + delayMs).toISOString(),
  };
  const json = { contentType: 'application/json' };
  const line = failedAttemptLine(entry, attempts, failure);
  if (attempts >= MAX_ATTEMPTS) {
    await store.put(deadKey(keyPrefix, entry.id), JSON.stringify(next), json);
    await store.delete(key);
    if (line !== null) options.log(line);
    return null;
  }
  if (line !== null) options.log(line);
  // Refused: another process has attempted it meanwhile, and rescheduled or delivered it.
  await store.put(key, JSON.stringify(next), { ...json, ifMatch: etag });
  return delayMs;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
