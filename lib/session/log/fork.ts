import {
  ForkRefusedError,
  InvalidRequestError,
  NotFoundError,
  SessionExistsError,
  StorageError,
} from '../../errors.ts';
import { EMPTY_LEDGER } from '../../ledger/usage.ts';
import { recordKey, type ForkPoint, type LogScope } from '../keys.ts';
import { MAX_FORK_DEPTH } from '../fork-point.ts';
import type { LogRecord, SessionConfig, SessionCounts } from '../records.ts';
import { SegmentReader } from '../segment.ts';
import { stateOf, type RecordState } from '../segment-states.ts';
import { unitTop, type LogUnit } from '../unit-cursor.ts';
import type { LogContext } from './context.ts';
import { checkedConfig, newConfig, putNewConfig, toSessionRecord } from './config-object.ts';
import { sweepSession } from './sweep.ts';
import { forkMarkers } from './fork-refs.ts';
import { countsOf, readConfig, readHead, readRecord, scopeOf, withFreshListing, type Head } from './head.ts';
import { refreshIndex } from './session-index.ts';
import type { NewSession, SessionRecord } from './types.ts';

/**
 * Copy-on-write forks (docs/STORAGE.md, "Forks"). A fork is a new session whose config names
 * the incarnations its history continues in (`fork_of`, nearest first, each up to a record);
 * its own records start right after the fork point, numbered on from it, with a first record
 * of no items that carries the state there (counts, context start, overflow boundary, open
 * calls), taken from the record there or, once it is packed, from its segment's states. Its
 * readers go on into the ancestors' records and segments below the fork point
 * (lib/session/unit-cursor.ts), so nothing of the shared history is copied.
 */

export interface ForkOptions {
  /** Fork after this model turn (its outputs included). */
  at_turn?: number;
  /** Fork after the record ending at this seq (a turn with its outputs, an append). */
  at_seq?: number;
  /** The fork's own fields: `id`, and whatever differs from the parent's config. */
  fields: NewSession;
  /** Throws to refuse the fork's config before anything is written (its model offered the parent's tools). */
  check?: (config: SessionConfig) => void;
}

export type Point = NonNullable<Head['newest']>;

/**
 * A fork as `forkSession` would write it, nothing written: the parent's head it was found in, its
 * config, its scope, and its first record (the state at the fork point). A session stored before
 * generations existed, a point still running, one in a segment without record states, or a chain
 * past MAX_FORK_DEPTH: ForkRefusedError; a point the session does not hold: InvalidRequestError.
 */
export async function planFork(
  log: LogContext,
  parentId: string,
  options: ForkOptions,
): Promise<{ head: Head; config: SessionConfig; scope: LogScope; first: LogRecord; counts: SessionCounts }> {
  // A record or segment packed or merged since the listing: list again.
  const { head, point } = await withFreshListing(async () => {
    const head = await readHead(log, parentId, 100);
    if (head.scope.generation === '')
      throw new ForkRefusedError(
        `session ${parentId} was stored before generations existed and cannot be forked`,
        refusedAt(parentId, options),
      );
    return { head, point: await findForkPoint(log, head, options) };
  });
  const counts = point.counts;
  const chain = forkChain(head.scope, point.record, counts.items);
  if (chain.length > MAX_FORK_DEPTH)
    throw new ForkRefusedError(
      `a fork reads at most ${MAX_FORK_DEPTH} sessions' histories; a fork of session ${parentId} would read ` +
        `${chain.length}`,
      refusedAt(parentId, options),
    );
  const config = checkedConfig({
    ...newConfig(log, { ...inherited(head.config), ...options.fields }),
    fork_of: chain,
  });
  options.check?.(config);
  return { head, config, scope: scopeOf(log.keyPrefix, config), first: forkRecord(point, config.created_at), counts };
}

/** See SessionLog.fork. */
export async function forkSession(log: LogContext, parentId: string, options: ForkOptions): Promise<SessionRecord> {
  const { head, config, scope, first, counts } = await planFork(log, parentId, options);
  const markers = forkMarkers(log, config.fork_of!, config.id, config.generation!);
  const started = log.clock().getTime();
  try {
    await putForkStart(log, config, scope, first, markers);
    // After the references: the forked incarnation still exists, so a delete of it from now
    // on lists them and keeps what the fork reads.
    const { config: current } = await readConfig(log, parentId);
    if (current.generation !== head.config.generation)
      throw new NotFoundError(`session ${parentId} not found`, { id: parentId });
    if (log.clock().getTime() - started > log.leaseMs / 2)
      throw new StorageError('the fork took too long to write its references; try again');
  } catch (error) {
    await giveUp(log, config, scope, first.record, markers);
    throw error;
  }
  // A failure here may hide a landed put: the references then stay (a delete sees them live).
  const written = await putNewConfig(log, config);
  if (!written) {
    await giveUp(log, config, scope, first.record, markers);
    throw new SessionExistsError(config.id);
  }
  try {
    await refreshIndex(log, config.id);
  } catch {
    // Listed from its next turn, append or PATCH.
  }
  return toSessionRecord(config, counts, EMPTY_LEDGER);
}

/** Puts the references under every incarnation a fork reads, then its first record (create-only). */
export async function putForkStart(
  log: LogContext,
  config: SessionConfig,
  scope: LogScope,
  first: LogRecord,
  markers: string[],
): Promise<void> {
  const marker = JSON.stringify({ child: config.id, generation: config.generation, created_at: config.created_at });
  await Promise.all(
    markers.map((key) => log.store.put(key, marker, { onlyIfAbsent: true, contentType: 'application/json' })),
  );
  await log.store.put(recordKey(scope, first.record), JSON.stringify(first), {
    onlyIfAbsent: true,
    contentType: 'application/json',
  });
}

/** Removes what a fork that did not happen wrote, and sweeps its ancestors of what it had kept. */
export async function giveUp(
  log: LogContext,
  config: SessionConfig,
  scope: LogScope,
  record: number,
  markers: string[],
): Promise<void> {
  await log.store.delete([recordKey(scope, record), ...markers]);
  // An ancestor's id may be under import (its session gone): what that import wrote stays.
  for (const point of config.fork_of ?? []) await sweepSession(log, point.id, { keepImports: true });
}

/** What every refusal of a fork names: the session (`id`), and its fork point (`turn` or `seq`, as asked). */
function refusedAt(id: string, at: ForkOptions): { id: string; turn: number } | { id: string; seq: number } {
  return at.at_turn !== undefined ? { id, turn: at.at_turn } : { id, seq: at.at_seq! };
}

/** The parent's fields a fork keeps unless it sets its own. */
function inherited(config: SessionConfig): NewSession {
  return {
    instructions: config.instructions,
    model: config.model,
    strategies: config.strategies,
    strategy_config: config.strategy_config as NewSession['strategy_config'],
    tools: config.tools,
    metadata: config.metadata,
    ...(config.on_busy ? { on_busy: config.on_busy } : {}),
    ...(config.budget ? { budget: config.budget } : {}),
    ...(config.expires_after_days ? { expires_after_days: config.expires_after_days } : {}),
    ...(config.webhook_url ? { webhook_url: config.webhook_url } : {}),
  };
}

/**
 * The state of the record the fork point names, read newest first from the head: a closed
 * record ending at `at_seq`, or the record of turn `at_turn`. A point inside a segment is
 * found in the segment's states section (lib/session/segment-states.ts).
 */
async function findForkPoint(log: LogContext, head: Head, at: ForkOptions): Promise<RecordState> {
  const byTurn = at.at_turn !== undefined;
  const field = byTurn ? 'at_turn' : 'at_seq';
  const wanted = byTurn ? `turn ${at.at_turn}` : `seq ${at.at_seq}`;
  // A point no record ends at: a seq within the session's items is in it, at no record's end.
  const missing = () => {
    const held = !byTurn && at.at_seq! >= 1 && at.at_seq! <= countsOf(head.newest).items;
    return new InvalidRequestError(
      held
        ? `${field}: seq ${at.at_seq} does not end a turn or an append of session ${head.config.id}`
        : `${field}: ${wanted} is not in session ${head.config.id}`,
      { field },
    );
  };
  let unit: LogUnit | null = null;
  for (let point = head.newest; ; ) {
    let states: RecordState[];
    if (point) {
      const state = stateOf(point.record, point.done);
      if (matches(state, at) && point.record.kind === 'turn' && !point.done)
        throw new ForkRefusedError(
          `${wanted} of session ${head.config.id} ${byTurn ? 'is' : `is in turn ${point.record.turn},`} ` +
            'still running; fork once it ended',
          refusedAt(head.config.id, at),
        );
      states = [state];
    } else if (unit?.kind === 'segment') {
      const packed = await new SegmentReader(log.store, unit.key, unit).states();
      if (!packed)
        throw new ForkRefusedError(
          `${wanted} of session ${head.config.id} is in a segment written before segments kept each record's state`,
          refusedAt(head.config.id, at),
        );
      const top = unitTop(unit);
      states = packed.filter((state) => state.counts.items <= top).reverse();
    } else {
      // Walked past the first record.
      throw missing();
    }
    for (const state of states) {
      if (matches(state, at)) return state;
      if (byTurn ? state.counts.turns < at.at_turn! : state.counts.items < at.at_seq!) throw missing();
    }
    unit = await head.cursor.next();
    point = unit?.kind === 'record' ? await readRecord(log, unit) : null;
  }
}

function matches(state: RecordState, at: ForkOptions): boolean {
  return at.at_turn !== undefined ? state.turn === at.at_turn : state.counts.items === at.at_seq;
}

/**
 * The incarnations a fork at record `record` (ending at seq `seq`) of `scope` reads, nearest
 * first: the forked session's own, then its ancestors; a point inside an ancestor's range
 * starts at that ancestor.
 */
export function forkChain(scope: LogScope, record: number, seq: number): ForkPoint[] {
  const ancestors = scope.ancestors ?? [];
  if (ancestors.length === 0 || record > ancestors[0]!.record)
    return [{ id: scope.id, generation: scope.generation, record, seq }, ...ancestors];
  const owner = ancestors.findIndex((_, index) => record > (ancestors[index + 1]?.record ?? 0));
  return [{ ...ancestors[owner]!, record, seq }, ...ancestors.slice(owner + 1)];
}

/** The fork's first record: no items, the state at the fork point (none: an empty log's). */
export function forkRecord(at: RecordState | null, createdAt: string): LogRecord {
  const point = at ?? { record: 0, counts: { items: 0, turns: 0, tool_calls: 0 }, context: null };
  return {
    format: 'tailgate.record.v1',
    record: point.record + 1,
    kind: 'append',
    created_at: createdAt,
    writer: crypto.randomUUID(),
    first_seq: point.counts.items + 1,
    items: [],
    counts: point.counts,
    ...(point.context ? { context: point.context } : {}),
    ...(point.overflow ? { overflow: point.overflow } : {}),
    ...(point.open_calls ? { open_calls: point.open_calls } : {}),
  };
}
