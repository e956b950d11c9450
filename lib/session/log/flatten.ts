import { CorruptObjectError, DeleteRefusedError } from '../../errors.ts';
import { MAX_FORK_DEPTH, type NamedPoint } from '../fork-point.ts';
import {
  ancestorScope,
  doneKey,
  newGeneration,
  recordKey,
  recordsPrefix,
  type ForkPoint,
  type LogScope,
} from '../keys.ts';
import type { DoneRecord, LogItem, LogRecord, SessionConfig } from '../records.ts';
import { SegmentReader, type SegmentContent } from '../segment.ts';
import { stateOf, type RecordState } from '../segment-states.ts';
import { logCursor, type LogUnit } from '../unit-cursor.ts';
import type { LogView } from '../view-records.ts';
import type { LogContext } from './context.ts';
import { forkChain, giveUp } from './fork.ts';
import { readRecord, scopeOf, withFreshListing, type Head } from './head.ts';
import { VIEW_EVERY_RECORDS } from './import.ts';
import { carryAfter, segmentTurnOf, writeSegment } from './packer.ts';
import { copyObjects, namesOf, sweepFlattened } from './flatten-copy.ts';
import type { PackOptions } from './types.ts';
import { heldView } from './view-writer.ts';
import { adoptedView } from './ancestor-view.ts';

/**
 * Flattening a history (docs/STORAGE.md, "Deleting the newest turn"): a delete of the newest turn
 * whose new generation would read more generations than a config names (MAX_FORK_DEPTH) writes
 * the history it would read as that generation's own instead (above the oldest generation of this
 * id it reads, which it reads as a fork while those above hold no more items: see flattened), as
 * the packer would have left it there: segments of the same records (numbers, items, turns and
 * states), cut at each fork point, but the newest few, which stay records (looseTail: the newest
 * turn can be deleted in turn), with the objects found by record, turn or hash under a generation
 * copied along: its blobs, the summaries of its compactions, the `idem/` claims of its turns
 * (this id's) and the event journals of its turns, each up to the point the history reads it to.
 * All of it is written under the new generation before anything names it, so a failure or a crash
 * leaves garbage the next delete of the id sweeps (reader assumption 5). The ids of the items
 * keep naming the generations that held them (`named`, returned). The generations it copied from
 * stay while the config names the new one (their references, written by the delete as for any
 * fork of itself): a turn closed by someone else there is still charged from its `spent/` object.
 */

/** The units of a history, oldest first, each with the last record of it the history reads. */
interface Source {
  unit: LogUnit;
  upTo: number;
}

/** One closed record or a part of a segment, ready to be packed again. */
interface Piece {
  /** A record's own objects (not a segment's part). */
  own?: { record: LogRecord; done: DoneRecord | null };
  firstRecord: number;
  lastRecord: number;
  items: LogItem[];
  turns: SegmentContent['turns'];
  states: NonNullable<SegmentContent['states']>;
}

/**
 * Writes the history a fork reading `chain` (nearest first: generations of this id) would read
 * as the own records of `scope` (a generation nothing names yet), up to `chain[0]`: from the
 * record after its own ancestors' point (`scope.ancestors`: the chain's oldest generation, when
 * it is not copied but read as a fork reads it, and another session's history, read so too),
 * else from record 1. Returns what the config's `named` becomes: the chain's generations for
 * the seqs they held, then those `named` (the head's) names below them, at most
 * MAX_NAMED_GENERATIONS, the oldest always among them (./flatten-copy.ts capped). A segment
 * without states refuses (DeleteRefusedError: it cannot be cut at a record).
 */
export async function flattenHistory(
  log: LogContext,
  scope: LogScope,
  chain: readonly ForkPoint[],
  named: readonly NamedPoint[] | undefined,
  pack: PackOptions = {},
): Promise<{ named: NamedPoint[]; views: HeldViews | null }> {
  const base = scope.ancestors?.[0]?.id === scope.id ? scope.ancestors[0] : undefined;
  const copied = base ? chain.slice(0, -1) : chain;
  // A unit packed or merged meanwhile is listed again: the segments written before it go first, or
  // they would be read as the history's own and overlap those cut anew (and the views' shards).
  const { turnsAt, views } = await withFreshListing(async () => {
    try {
      const held = !scope.ancestors
        ? { prior: null, held: [] }
        : base && scope.ancestors.length === 1
          ? await baseViews(log, scope, base, pack)
          : null;
      return await writeSegments(log, scope, copied, pack, held);
    } catch (error) {
      await sweepFlattened(log, scope, ['turn', 'keys', 'tail']);
      throw error;
    }
  });
  await Promise.all(copied.map((point) => copyObjects(log, scope, point, turnsAt.get(point.record) ?? 0)));
  return { named: namesOf(chain, named), views };
}

/**
 * The views of `base`'s history up to its point (the generation a flattening reads and does not
 * copy) as a flattening holds them (HeldViews): from the newest view stored there at or below
 * its point (log/ancestor-view.ts), else its start; the units after it are read, none written.
 */
async function baseViews(log: LogContext, scope: LogScope, base: ForkPoint, pack: PackOptions): Promise<HeldViews> {
  const prior = await adoptedView(log, scope, base);
  const views: HeldViews = { prior, held: [] };
  let read = 0;
  for (const source of await listSources(log, { ...scope, ancestors: [] }, [base], prior?.record)) {
    const piece = await pieceOf(log, source);
    views.held.push(...piece.items.filter((item) => item.seq > (prior?.last_seq ?? 0)));
    read += 1;
    if (read % VIEW_EVERY_RECORDS === 0) await holdView(log, scope, views, piece.states.at(-1)!, piece.items, pack);
  }
  return views;
}

/**
 * Makes the view of the record closing with `state` in memory (log/view-writer.ts heldView) from
 * `views` (their items, `items` the last unit's): a record carrying that unit's items, as an
 * import's view takes its record.
 */
async function holdView(
  log: LogContext,
  scope: LogScope,
  views: HeldViews,
  state: RecordState,
  items: LogItem[],
  pack: PackOptions,
): Promise<void> {
  const firstSeq = items[0]?.seq ?? state.counts.items + 1;
  const newest = { record: recordAt(state, firstSeq, items, log.clock().toISOString()), done: null };
  views.prior = await heldView(log, scope, newest, views.prior, views.held, pack.requirement);
  views.held = [];
}

/**
 * The newest view a flattening made in memory (log/view-writer.ts heldView), or the one it
 * started from (the oldest generation's: baseViews; null: none yet), and every item after it,
 * for the new generation's first view: null when the history goes on into another session's.
 */
export interface HeldViews {
  prior: LogView | null;
  held: LogItem[];
}

/**
 * Packs the history's units again into segments under `scope`, about segmentTargetBytes each,
 * but the newest records it keeps as records (looseTail), with a view made in memory every
 * VIEW_EVERY_RECORDS segments (see HeldViews). Returns the turn count of each record it read,
 * and the views held.
 */
async function writeSegments(
  log: LogContext,
  scope: LogScope,
  chain: readonly ForkPoint[],
  pack: PackOptions,
  views: HeldViews | null,
) {
  const sources = await listSources(log, scope, chain);
  // The blobs before the segments (a view made in memory holds outputs out of line whole, read
  // from `scope`) and after the listing: a segment packed meanwhile was stored after its blobs.
  await Promise.all(chain.map((point) => copyObjects(log, scope, point, null)));
  const turnsAt = new Map<number, number>();
  let content: SegmentContent | null = null;
  const below = scope.ancestors?.[0];
  let written = 0;
  // The messages before the first segment are known only from the log's start.
  let carried: LogItem[] | null = below ? null : [];
  let bytes = 0;
  let next = (below?.record ?? 0) + 1;
  // The seq before the next segment's first item (the last of the segments written).
  let seqBefore = below?.seq ?? 0;
  const flush = async () => {
    if (!content) return;
    await writeSegment(log, scope, content, seqBefore + 1);
    carried = carryAfter(
      content.carried,
      content.items.filter((item) => item.type === 'message'),
    );
    seqBefore = content.states!.at(-1)?.counts.items ?? seqBefore;
    const { items, states } = content;
    content = null;
    bytes = 0;
    if (!views) return;
    views.held.push(...items);
    written += 1;
    if (written % VIEW_EVERY_RECORDS === 0) await holdView(log, scope, views, states!.at(-1)!, items, pack);
  };
  const loose = await looseTail(log, sources);
  for (const [index, source] of sources.entries()) {
    const piece = loose.get(index) ?? (await pieceOf(log, source));
    if (piece.firstRecord !== next)
      throw new CorruptObjectError(sourceKey(source), `record ${piece.firstRecord} where ${next} was expected`);
    next = piece.lastRecord + 1;
    for (const state of piece.states) turnsAt.set(state.record, state.counts.turns);
    if (loose.has(index) && piece.own) {
      await flush();
      await putLoose(log, scope, piece.own);
      views?.held.push(...piece.items);
      continue;
    }
    const size = piece.items.reduce((sum, item) => sum + JSON.stringify(item).length + 1, 0);
    if (content && bytes + size > log.segmentTargetBytes) await flush();
    content ??= { firstRecord: piece.firstRecord, lastRecord: 0, items: [], turns: [], carried, states: [] };
    content.items.push(...piece.items);
    content.turns.push(...piece.turns);
    content.states!.push(...piece.states);
    content.lastRecord = piece.lastRecord;
    bytes += size;
  }
  await flush();
  if (next !== (chain[0]?.record ?? 0) + 1)
    throw new CorruptObjectError(recordsPrefix(scope), `the history ends at record ${next - 1}`);
  return { turnsAt, views };
}

/**
 * The newest records of the history that stay records (by their index in `sources`), read: those
 * a delete of the newest turn reads as records (log/rewind.ts pointBefore), as a pack leaves them
 * (it keeps the newest `keepRecords`): the records of no items after the newest turn or append,
 * that one, and the one before it. So the turn before the point of the delete that flattened can
 * be deleted in turn. Fewer when a segment comes first.
 */
async function looseTail(log: LogContext, sources: readonly Source[]): Promise<Map<number, Piece>> {
  const loose = new Map<number, Piece>();
  let found = false;
  for (let index = sources.length - 1; index >= 0 && sources[index]!.unit.kind === 'record'; index--) {
    const piece = await pieceOf(log, sources[index]!);
    loose.set(index, piece);
    if (found) break;
    found = piece.own!.record.kind === 'turn' || piece.own!.record.items.length > 0;
  }
  return loose;
}

/** A record and its completion, as they were (create-only: nothing else writes under `scope` yet). */
async function putLoose(log: LogContext, scope: LogScope, { record, done }: NonNullable<Piece['own']>) {
  const put = { onlyIfAbsent: true, contentType: 'application/json' };
  await log.store.put(recordKey(scope, record.record), JSON.stringify(record), put);
  if (done) await log.store.put(doneKey(scope, record.record), JSON.stringify(done), put);
}

/** A record closing with `state` and holding `items` (from `firstSeq`): what a held view is made of. */
function recordAt(state: RecordState, firstSeq: number, items: LogItem[], createdAt: string): LogRecord {
  return {
    format: 'tailgate.record.v1',
    record: state.record,
    kind: 'append',
    created_at: createdAt,
    first_seq: firstSeq,
    items,
    counts: state.counts,
    ...(state.context ? { context: state.context } : {}),
    ...(state.overflow ? { overflow: state.overflow } : {}),
    ...(state.open_calls ? { open_calls: state.open_calls } : {}),
  };
}

/**
 * The history's units oldest first, through a cursor reading `chain` below an empty generation;
 * with `after`, only those holding a record after it.
 */
async function listSources(
  log: LogContext,
  scope: LogScope,
  chain: readonly ForkPoint[],
  after = 0,
): Promise<Source[]> {
  const cursor = logCursor(log.store, { ...scope, ancestors: chain });
  const prefixes = chain.map((point) => ({
    prefix: recordsPrefix(ancestorScope(log.keyPrefix, point)),
    upTo: point.record,
  }));
  const sources: Source[] = [];
  for (let unit = await cursor.next(); unit; unit = await cursor.next()) {
    if ((unit.kind === 'record' ? unit.record : unit.lastRecord) <= after) break;
    const held = prefixes.find(({ prefix }) => unit.key.startsWith(prefix));
    if (!held) throw new CorruptObjectError(unit.key, 'a unit of no generation the history reads');
    sources.push({ unit, upTo: held.upTo });
  }
  return sources.reverse();
}

const sourceKey = (source: Source) => source.unit.key;

/** A record as the packer packs it, or a segment's records up to `upTo`. */
async function pieceOf(log: LogContext, { unit, upTo }: Source): Promise<Piece> {
  if (unit.kind === 'record') {
    const { record, done } = await readRecord(log, unit);
    if (record.kind === 'turn' && !done) throw new CorruptObjectError(unit.key, 'an open turn in a history it reads');
    return {
      own: { record, done },
      firstRecord: record.record,
      lastRecord: record.record,
      items: [...record.items, ...(done?.items ?? [])],
      turns: record.kind === 'turn' && done ? [segmentTurnOf(record, done)] : [],
      states: [stateOf(record, done)],
    };
  }
  const content = await new SegmentReader(log.store, unit.key, unit).content();
  if (!content.states)
    throw new DeleteRefusedError(`the history is in a segment written before segments kept each record's state`);
  const states = content.states.filter((state) => state.record <= upTo);
  const top = states.at(-1)?.counts.items ?? 0;
  return {
    firstRecord: content.firstRecord,
    lastRecord: Math.min(content.lastRecord, upTo),
    items: content.items.filter((item) => item.seq <= top),
    turns: content.turns.filter((turn) => turn.record <= upTo),
    states,
  };
}

/** giveUp (./fork.ts), and what a flattening wrote under the generation given up. */
export async function leave(
  log: LogContext,
  config: SessionConfig,
  scope: LogScope,
  record: number,
  markers: string[],
  flat: Flattened | null,
): Promise<void> {
  await giveUp(log, config, scope, record, markers);
  if (flat) await sweepFlattened(log, scope);
}

/** A history flattened under a new generation (log/flatten.ts) before the delete's fence. */
export interface Flattened {
  /** The new generation, and the ancestors it goes on reading (another session's: its `fork_of`). */
  scope: LogScope;
  /** The generations it was read from (their references keep them while the config names it). */
  chain: ForkPoint[];
  named: NamedPoint[];
  /** What its first view is made of, once its first record is written (see HeldViews). */
  views: HeldViews | null;
  /** What the session's strategies need of that view. */
  pack: PackOptions;
}

/**
 * The history a delete goes back to (`point`), flattened under a new generation, when it would
 * read more generations than a config names (null: it reads them as a fork). A failure removes
 * what it wrote.
 */
export async function flattened(
  log: LogContext,
  head: Head,
  point: RecordState | null,
  pack: PackOptions = {},
): Promise<Flattened | null> {
  const chain = point ? forkChain(head.scope, point.record, point.counts.items) : [];
  if (chain.length <= MAX_FORK_DEPTH) return null;
  // This id's generations are flattened; another session's history it forked is still read (at
  // most as deep as a fork of it may read).
  const ends = chain.findIndex((entry) => entry.id !== head.config.id);
  const own = ends < 0 ? chain : chain.slice(0, ends);
  const parent = chain.slice(own.length);
  // Its oldest generation (the last one flattened, or the first) is read as a fork reads it, and
  // only those above it copied, while they hold no more items than it: so what a flattening writes
  // grows with what came since the last one that copied it all, not with the whole history.
  const base = own.at(-1)!;
  const floor = parent[0]?.seq ?? 0;
  const reads = own.length > 1 && own[0]!.seq - base.seq <= base.seq - floor ? [base, ...parent] : parent;
  const generation = newGeneration(log.clock());
  const { fork_of: _, ...fields } = head.config;
  const scope = scopeOf(log.keyPrefix, { ...fields, generation, ...(reads.length > 0 ? { fork_of: reads } : {}) });
  try {
    const { named, views } = await flattenHistory(log, scope, own, head.config.named, pack);
    return { scope, chain, named, views, pack };
  } catch (error) {
    await sweepFlattened(log, scope).catch(() => undefined);
    throw error;
  }
}

/**
 * What `work` gives, up to the delete's new generation: when it throws or gives null (the delete
 * stops before writing that generation), what `flat` wrote is removed first.
 */
export async function orSwept<Result>(
  log: LogContext,
  flat: Flattened | null,
  work: () => Promise<Result | null>,
): Promise<Result | null> {
  let result: Result | null = null;
  try {
    result = await work();
    return result;
  } finally {
    if (flat && result === null) await sweepFlattened(log, flat.scope).catch(() => undefined);
  }
}
