import type { HistoryAggregates, TailRequirement } from '../../history.ts';
import type { ContextStart, LogItem, SessionConfig } from '../records.ts';
import type { LogView } from '../view-records.ts';

/** What a pack of a session's log is told (SessionLog.pack, log/packer.ts), and what it did. */

export interface PackOptions {
  /**
   * What the session's strategies need from its history, given its aggregates (see
   * `tailRequirement`): the tail a new view holds. Absent: the newest 256 calls and the
   * repeated ones, all outputs inline.
   */
  requirement?: (aggregates: HistoryAggregates, context: ContextStart | null) => TailRequirement;
  /** Write a view of the newest record even if none is due (a turn found its view stale). */
  refresh?: boolean;
  /**
   * The view the last pack of this session in this process wrote (its `written`): taken as
   * it is, not read and parsed again, when it is still the newest view listed.
   */
  lastView?: { key: string; view: LogView };
  /**
   * The pack an append runs for its overdue view before it answers (pack-schedule.ts
   * overdueView): it takes the items its record does not carry from `held`, and, since the
   * append waits for it, packs records into segments only as a pack without a new view would.
   * `generation`: the incarnation the append wrote to (a pack of another one leaves `held` out).
   * `viewOnly`: the pack writes the view, deletes the views it made stale and returns (the
   * append's pack debt within its bound): listing the records to pack, packing them and the
   * other deletes are left to the session's next pack, which is given `sweep`.
   */
  overdue?: { held: readonly LogItem[]; generation: string; viewOnly?: boolean };
  /**
   * A pack after one that wrote a view and left the rest (`overdue.viewOnly`): the listing goes
   * on to the third newest view, as after a view of its own, so that the view made stale goes.
   */
  sweep?: boolean;
  /**
   * The session's config as the caller read it for this pack: the pack takes the incarnation
   * to pack from it and reads none (lib/turn/append.ts reads it once for its strategies).
   */
  config?: SessionConfig;
}

export interface PackResult {
  /** The view written, when one was due. */
  view?: string;
  /** That view, when this pack stored it. */
  written?: LogView;
  /** Its stored bytes, its chunk's included (a view in a chunk lists only its own). */
  writtenBytes?: number;
  packed: boolean;
  /** The segment written (or found already written). */
  segment?: string;
  records?: number;
  /** The newest record a segment covers once the pack is done (absent: no segment yet). */
  through?: number;
  /** The generation packed (its records are the ones `through` counts). */
  generation?: string;
  /** Objects deleted: packed records, merged segments, leftovers of earlier crashes. */
  deleted: number;
  /** The pack wrote its view only (`overdue.viewOnly`): the next pack sweeps (PackOptions.sweep). */
  unswept?: true;
}
