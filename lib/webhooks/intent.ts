import { NotFoundError, TurnInProgressError } from '../errors.ts';
import type { IntentTurn } from '../session/log/types.ts';
import type { SessionLog } from '../session/session-log.ts';
import { putCreateOnly } from '../store/create-only.ts';
import type { ObjectStore } from '../store/object-store.ts';
import { intentEntry, turnEntry, type WebhookEntry, type WebhookSettings } from './events.ts';

/**
 * A turn's webhook intent (docs/STORAGE.md, "Webhook outbox"): an outbox entry written with
 * the turn's claim put, before its completion can exist, under the id its event will have. The
 * completion's writer replaces it with the event; when that writer died first, a drainer finds
 * the intent once the turn's lease ran out, reads the turn's outcome (closing the turn as a
 * newcomer would, failed `lease_expired`, if it is still open) and delivers that.
 */

const JSON_TYPE = { contentType: 'application/json' };

export const outboxPrefix = (keyPrefix: string) => `${keyPrefix}webhooks/outbox/`;

/** The session log's `onClaimed`: the turn's intent, create-only, in the store's outbox. */
export function turnIntents(
  settings: WebhookSettings,
  store: ObjectStore,
  keyPrefix: string,
  clock: () => Date,
): (turn: IntentTurn) => Promise<void> {
  return async (turn) => {
    const url = turn.session.webhook_url ?? settings.url;
    if (url === undefined) return;
    const entry = intentEntry(turn.scope, turn.turn, url, turn.leaseExpiresAt, clock());
    // Refused: the turn's intent or event is there already (an earlier claim attempt's, or the
    // claim's of an adopted record): what the drainer needs, so even a failed put found it there.
    await putCreateOnly(store, `${outboxPrefix(keyPrefix)}${entry.id}`, JSON.stringify(entry), JSON_TYPE, () => true);
  };
}

/**
 * What a drainer does with a due intent: deliver `entry` (the turn's event), wait `until` the
 * running turn's lease ends, `retry` with backoff (its claim has not landed, or may never), or
 * drop it (null: its session was deleted, or the turn was closed by the delete).
 */
export type IntentStep = { entry: WebhookEntry } | { until: string } | { retry: string } | null;

export async function resolveIntent(sessions: SessionLog, intent: WebhookEntry, now: Date): Promise<IntentStep> {
  const { session_id: id, generation, turn } = intent.intent!;
  const scope = await sessions.scope(id).catch((error: unknown) => {
    if (error instanceof NotFoundError) return null;
    throw error;
  });
  if (!scope || scope.generation !== generation) return null;
  for (let tries = 0; tries < 3; tries++) {
    const summary = await sessions.getTurn(id, turn).catch((error: unknown) => {
      if (error instanceof NotFoundError) return null;
      throw error;
    });
    if (!summary) return { retry: `turn ${turn} has no record` };
    if (summary.status !== 'in_progress' && summary.status !== 'queued') {
      const event = turnEntry(
        {
          scope,
          turn,
          status: summary.status === 'cancelled' ? 'failed' : summary.status,
          error: summary.error ?? undefined,
          usage: summary.status === 'completed' ? (summary.usage ?? undefined) : undefined,
          compactionUsage: summary.status === 'completed' ? summary.compaction_usage : undefined,
          completedAt: summary.completed_at ?? now.toISOString(),
          webhookUrl: intent.url,
        },
        intent.url,
        now,
      );
      return event ? { entry: { ...event, attempts: intent.attempts } } : null;
    }
    try {
      // Closed now (or found closed): its outcome is read on the next pass.
      await sessions.closeIfExpired(id, turn);
    } catch (error) {
      if (!(error instanceof TurnInProgressError)) throw error;
      const until = (error.details as { lease_expires_at?: string }).lease_expires_at;
      return until ? { until } : { retry: `turn ${turn} is in progress` };
    }
  }
  return { retry: `turn ${turn} is still open` };
}
