import { z } from 'zod';
import { SESSION_DELETED, TURN_CANCELLED } from '../errors.ts';
import { clientError } from '../error-codes.ts';
import { sha256Hex } from '../hash.ts';
import type { LogScope } from '../session/keys.ts';
import { closedState } from '../session/log/turns.ts';
import type { ClosedTurn } from '../session/log/types.ts';

/**
 * The webhook events (docs/API.md, "Webhooks"): `turn.completed`, `turn.failed`,
 * `turn.cancelled` once a turn's completion landed, whoever wrote it, `session.idle` when a
 * turn closed with nothing queued behind it, and `session.held` when the spent budget held the
 * input queued next. Each becomes an outbox entry (its delivery state) handed to the runtime's
 * sink, durably, before the close is answered: a Queues message on Workers, an object under
 * `<KEY_PREFIX>webhooks/outbox/` on Node and Deno (lib/webhooks/outbox.ts).
 * A payload never holds a prompt's or an answer's content.
 */

export type WebhookEventType = 'turn.completed' | 'turn.failed' | 'turn.cancelled' | 'session.idle' | 'session.held';

/** An event to deliver, with its delivery state (the queue message, or the outbox object). */
export const webhookEntrySchema = z.object({
  format: z.literal('tailgate.webhook.v1'),
  /** The `webhook-id`: the same on every attempt, so a receiver drops repeats by it. */
  id: z.string(),
  url: z.string(),
  /** The JSON text signed and posted. */
  body: z.string(),
  created_at: z.string(),
  /** Attempts made so far, and when the next is due (the outbox's; Queues keep their own). */
  attempts: z.number().int().nonnegative(),
  next_attempt_at: z.string(),
  last_error: z.string().optional(),
  /**
   * An intent (lib/webhooks/intent.ts): the turn whose outcome this entry will carry, written
   * with its claim; `body` is empty until a drainer read that outcome.
   */
  intent: z.object({ session_id: z.string(), generation: z.string(), turn: z.number().int() }).optional(),
});
export type WebhookEntry = z.infer<typeof webhookEntrySchema>;

/** Stores an entry durably for delivery: resolves once it is (a failure fails the close). */
export type WebhookSink = (entry: WebhookEntry) => Promise<void>;

export interface WebhookSettings {
  /** WEBHOOK_URL: where a session without its own `webhook_url` sends its events. */
  url: string | undefined;
}

/** The session log's `onClosed`: the turn's event, when its session has somewhere to send it. */
export function turnWebhooks(
  settings: WebhookSettings,
  sink: WebhookSink,
  clock: () => Date,
): (closed: ClosedTurn) => Promise<void> {
  return async (closed) => {
    const url = closed.webhookUrl ?? settings.url;
    if (url === undefined) return;
    const entry = turnEntry(closed, url, clock());
    if (entry) await sink(entry);
  };
}

/** A closed turn's event to `url` (null for a deleted session's turn: nobody's news). */
export function turnEntry(closed: ClosedTurn, url: string, now: Date): WebhookEntry | null {
  if (closed.error?.code === SESSION_DELETED) return null;
  const type: WebhookEventType =
    closed.status === 'completed'
      ? 'turn.completed'
      : closed.error?.code === TURN_CANCELLED
        ? 'turn.cancelled'
        : 'turn.failed';
  return webhookEntry(closed.scope, `turn/${closed.turn}`, url, type, now, {
    session_id: closed.scope.id,
    turn: closed.turn,
    // As its receipt reads it: a turn a cancel or an interrupt closed is `cancelled`.
    status: closedState(closed.status, closed.error?.code),
    completed_at: closed.completedAt,
    // What a client may see of it: a provider's or a store's own text stays in the logs.
    ...(closed.error ? { error: clientError({ code: closed.error.code, message: closed.error.message }) } : {}),
    ...(closed.usage ? { usage: closed.usage } : {}),
    ...(closed.compactionUsage ? { compaction_usage: closed.compactionUsage } : {}),
  });
}

/**
 * The intent of turn `turn`'s event, due when its lease runs out (lib/webhooks/intent.ts):
 * the same id as the event, so the event written after the completion replaces it.
 */
export function intentEntry(scope: LogScope, turn: number, url: string, due: string, now: Date): WebhookEntry {
  const entry = webhookEntry(scope, `turn/${turn}`, url, 'turn.completed', now, {});
  return {
    ...entry,
    body: '',
    next_attempt_at: due,
    intent: { session_id: scope.id, generation: scope.generation, turn },
  };
}

/** `session.held` after turn `turn` closed and the spent budget refused the input queued next (`held`: its 402's). */
export function heldEntry(scope: LogScope, turn: number, url: string, now: Date, held: object): WebhookEntry {
  return webhookEntry(scope, `held/${turn}`, url, 'session.held', now, {
    session_id: scope.id,
    turn,
    held: { reason: 'budget_exhausted', ...held },
  });
}

/** `session.idle` after turn `turn` closed and no input was queued behind it. */
export function idleEntry(scope: LogScope, turn: number, url: string, now: Date): WebhookEntry {
  return webhookEntry(scope, `idle/${turn}`, url, 'session.idle', now, {
    session_id: scope.id,
    turn,
    idle_since: now.toISOString(),
  });
}

/**
 * An entry whose id names what it reports (the session's incarnation and `subject`), so every
 * writer of the same event writes the same id: a receiver, and a create-only outbox, see one.
 */
function webhookEntry(
  scope: LogScope,
  subject: string,
  url: string,
  type: WebhookEventType,
  now: Date,
  data: Record<string, unknown>,
): WebhookEntry {
  const id = `msg_${sha256Hex(`${scope.keyPrefix}\n${scope.id}\n${scope.generation}\n${subject}`).slice(0, 32)}`;
  const created = now.toISOString();
  return {
    format: 'tailgate.webhook.v1',
    id,
    url,
    body: JSON.stringify({ type, timestamp: created, data }),
    created_at: created,
    attempts: 0,
    next_attempt_at: created,
  };
}
