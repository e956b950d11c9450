import { z } from 'zod';
import { sha256Hex } from '../hash.ts';
import type { Item } from '../items.ts';
import type { AppendKey } from '../session/log/append.ts';
import { checkInvariant } from '../session/log/context.ts';
import { MAX_PACK_DEBT_RECORDS, type OverdueView } from '../session/log/pack-schedule.ts';
import type { SessionLog } from '../session/session-log.ts';
import { afterResponse } from './after-response.ts';
import { type DeadTurnServices, writeWithoutDead } from './dead-turn.ts';
import { packOptions, sessionStrategyPlan } from './plan.ts';
import type { TurnServices } from './types.ts';

const idempotencyKeySchema = z.string().min(1).max(256);

/** How often (in log records) a completed turn or append starts packing in the background. */
export const PACK_EVERY_RECORDS = 4;

/**
 * Appends items without a model turn (POST /items) and, every few records, packs the log in
 * the background as turns do, so the next turn finds a recent view. An append that leaves
 * more than MAX_PACK_DEBT_RECORDS records outside segments, or more records after the newest
 * view than MAX_RECORDS_AFTER_VIEW or than its record carries, or more bytes of their items
 * than afterViewBytes of that view, packs before it answers instead
 * (with a view), so packing keeps up with any append rate (lib/session/log/pack-schedule.ts);
 * when its own items are more than that, a record of no items follows it, so the newest record
 * stays small (lib/session/log/state-record.ts). The dead turn of a turn answered at its end, whose
 * process died, is taken out before the items are stored after it (./dead-turn.ts).
 */
export async function appendItems(
  services: Pick<TurnServices, 'env' | 'background' | 'log'> &
    DeadTurnServices & {
      sessions: Pick<
        SessionLog,
        'append' | 'config' | 'pack' | 'packSchedule' | 'putStateAfter' | 'refreshIndex' | 'storeAttachments'
      >;
    },
  sessionId: string,
  items: Item[],
  options: {
    /** Only as the session's first record (SessionLog.append): else nothing is appended. */
    onlyFirst?: boolean;
    /** False: the caller writes the session's listing row itself, once, after what it writes next. */
    refreshIndex?: boolean;
    /**
     * The request's Idempotency-Key: a retry (the same items) is answered with the first one's
     * seqs, nothing stored again; the key of another request is 422 `idempotency_key_reused`.
     */
    idempotencyKey?: string;
  } = {},
): Promise<{ first_seq: number; last_seq: number }> {
  const { sessions } = services;
  const key = options.idempotencyKey === undefined ? undefined : appendKey(options.idempotencyKey, items);
  // Keyed or not, the append takes a dead turn out first; its retry replays before any such refusal.
  // The blobs go under the generation read just before each write: one that took a dead turn out
  // moved the session to another (with no ancestor, when that turn was its first record).
  const appended = await writeWithoutDead(services, sessionId, async (lapsed) => {
    const stored = await sessions.storeAttachments(sessionId, items);
    const appendOptions = { packsOverdue: true, onlyFirst: options.onlyFirst ?? false, ...lapsed, key };
    return sessions.append(sessionId, stored, appendOptions);
  });
  if ('replayed' in appended) return { first_seq: appended.first_seq, last_seq: appended.last_seq };
  const { first_seq, last_seq, record, generation, overdue, indexed } = appended;
  // The listing row from the record just written: no head to read again.
  if (options.refreshIndex !== false) afterResponse(services, async () => sessions.refreshIndex(sessionId, indexed));
  // `refresh`: the view of the newest record is written even when packing would not find one due.
  // The config is read when the pack starts (it may wait behind another): one get for the
  // strategies and the incarnation, where the session's head (config, listing, record) was two
  // more and the pack read the config again.
  const packing = (refresh = false, overdue?: OverdueView & { viewOnly: boolean }) =>
    sessions.packSchedule.run(
      sessionId,
      async (lastView, sweep) => {
        const config = await sessions.config(sessionId);
        return sessions.pack(sessionId, {
          ...packOptions(sessionStrategyPlan(services.env, config)),
          config,
          ...(lastView ? { lastView } : {}),
          ...(refresh ? { refresh } : {}),
          ...(overdue ? { overdue } : {}),
          ...(sweep ? { sweep } : {}),
        });
      },
      services.log,
      generation,
    );
  const indebted = sessions.packSchedule.debt({ id: sessionId, generation }, record) > MAX_PACK_DEBT_RECORDS;
  if (overdue || indebted) {
    // Within the debt bound, an overdue append waits for its view (and the stale view's delete)
    // only: the records' listing and their segments are left to the next pack (PackOptions.sweep),
    // which the background packs every PACK_EVERY_RECORDS records run.
    await packing(overdue !== undefined, overdue && { ...overdue, viewOnly: !indebted });
    // Its view written, a large record gives way to a small one as the newest (log/state-record.ts).
    // A failed put is logged: the append stands, the next readers read its record whole.
    if (overdue)
      await sessions.putStateAfter(overdue, (error) =>
        services.log(`tailgate: the record of no items after an append to session ${sessionId} failed`, error),
      );
  }
  if (!indebted && record % PACK_EVERY_RECORDS === 0) afterResponse(services, () => packing());
  return { first_seq, last_seq };
}

/** An append's `key`: the request it stands for is its items as sent (before their attachments were stored). */
function appendKey(key: string, items: Item[]): AppendKey {
  const keyHash = sha256Hex(checkInvariant(idempotencyKeySchema, key));
  return { keyHash, requestHash: sha256Hex(JSON.stringify({ append: items })) };
}
