import { decodeUtf8, mapLimit } from '../store/object-store.ts';
import { decisionOf, type LostTurn, lostDeliveries } from './carry.ts';
import { peekDecision } from './decision-chain.ts';
import { CONCURRENCY, decodeName, META } from './delivery-records.ts';
import type { InboxContext } from './move.ts';
import { ABORT_NOTICE_NAME, compareBytes } from './notice-name.ts';
import type { PreviewNotice } from './types.ts';

/**
 * What `recover` (lib/inbox/carry.ts) takes over now for the next turn from turns closed by
 * someone else (`lost`, the session's `undelivered.lost_turns`), without side effects, for the
 * prompt preview: the notices of the delivery records naming one of those turns, written since
 * its claim, in name order, an `abort` left out (it ended the turn that took it). One listing
 * of `inbox_removed/` (per 1000 records, and a head per recent record where listings carry no
 * metadata, S3), a get per record found and one per decision key beside it; never writes. A
 * record read away meanwhile (taken over by a turn starting now) is left out, as is one that no
 * longer names a lost turn, and one whose chain of decision keys (lib/inbox/decision-chain.ts)
 * another holds or a give-back ended: that notice goes back to the inbox (a give-back that died
 * once it posted it back left the record), where the turn takes it, and `Inbox.peek` shows it. One
 * a give-back that died did not post back yet is posted back by the next turn's `recover`, after
 * that turn listed the inbox alongside its claim: the turn after takes it, and neither shows here.
 */
export async function previewLost(
  ctx: InboxContext,
  sessionId: string,
  lost: readonly LostTurn[],
): Promise<PreviewNotice[]> {
  if (lost.length === 0) return [];
  const removedPrefix = ctx.removedPrefix(sessionId);
  const turns = new Set(lost.map((entry) => String(entry.turn)));
  const found = await mapLimit(await lostDeliveries(ctx, sessionId, lost), CONCURRENCY, async (info) => {
    const name = decodeName(info.metadata[META.name]) ?? info.key.slice(removedPrefix.length);
    if (name === ABORT_NOTICE_NAME) return null;
    const object = await ctx.store.get(info.key);
    const from = object?.metadata[META.turn];
    if (!object || from === undefined || !turns.has(from)) return null;
    const open = (await peekDecision(ctx, info.key, decisionOf(object), turns)) === 'open';
    return open ? { name, content: decodeUtf8(object.body) } : null;
  });
  return found
    .filter((notice): notice is PreviewNotice => notice !== null)
    .sort((left, right) => compareBytes(left.name, right.name));
}
