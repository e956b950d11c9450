import { InvalidRequestError, NotFoundError, StorageError, SessionExistsError, SESSION_DELETED } from '../../errors.ts';
import { putCreateOnly } from '../../store/create-only.ts';
import type { ObjectStore } from '../../store/object-store.ts';
import { splitStrategyNames } from '../../history.ts';
import { ofIncarnation } from '../incarnation.ts';
import { doneKey, newGeneration, sessionConfigKey, validateId, type LogScope } from '../keys.ts';
import { parseStored, sessionConfigSchema, sessionCounts, type SessionConfig, type SessionCounts } from '../records.ts';
import { backoff, MAX_CLAIM_ATTEMPTS, type LogContext } from './context.ts';
import { countsOf, readConfig, readHead, readNewest, scopeOf } from './head.ts';
import { EMPTY_LEDGER, sessionUsage, type Ledger } from '../../ledger/usage.ts';
import { shownTotals } from './charges.ts';
import { closeTurn } from './lease.ts';
import { forkMarkers, namesGeneration } from './fork-refs.ts';
import { sweepSession } from './sweep.ts';
import { indexCreated, refreshIndex, removeIndexEntries, writeIndexEntry } from './session-index.ts';
import { markDeleted } from './index-markers.ts';
import type { ClosedTurn, NewSession, SessionPatch, SessionRecord } from './types.ts';

/** The session's config object (`session.json`): create, read, update, delete, and the incarnation it names. */

/** See SessionLog.create. */
export async function createSession(log: LogContext, input: NewSession, requestHash?: string): Promise<SessionRecord> {
  const fields = input.budget || !log.defaultBudget ? input : { ...input, budget: log.defaultBudget };
  const config = checkedConfig({
    ...newConfig(log, fields),
    ...(requestHash !== undefined ? { request_sha256: requestHash } : {}),
  });
  const written = await putNewConfig(log, config);
  if (!written) throw new SessionExistsError(config.id);
  try {
    await indexCreated(log, config);
  } catch {
    // The session exists: without its index entry it is listed from its next turn, append or PATCH.
  }
  return toSessionRecord(config, { items: 0, turns: 0, tool_calls: 0 }, EMPTY_LEDGER);
}

/**
 * The create-only put of a new incarnation's config (a create's, a fork's): true when the config
 * at its key is this one, whatever its put answered. The generation is random: a config there
 * whose fields name it (incarnation.ts `ofIncarnation`) is this write. Not one that merely carries
 * its text elsewhere (another session's, created first, naming it in its metadata).
 */
export function putNewConfig(log: LogContext, config: SessionConfig): Promise<boolean> {
  return putCreateOnly(
    log.store,
    sessionConfigKey(log.keyPrefix, config.id),
    JSON.stringify(config),
    { contentType: 'application/json' },
    (object) => ofIncarnation(object.body, config.generation!),
  );
}

/**
 * The generation of a new incarnation (a create, a fork, an import), and what names it from the
 * start: `rewound`, so the ids of its turns name it (log/rewind.ts idGeneration; an id of an
 * incarnation deleted before, whose turns had the same numbers and seqs, names nothing here), and
 * `incarnation`, which bound tokens name (a new one: no token of another incarnation opens it).
 */
export function newIncarnation(now: Date): Pick<SessionConfig, 'generation' | 'rewound' | 'incarnation'> {
  const generation = newGeneration(now);
  return { generation, rewound: [generation], incarnation: generation };
}

/** The config of a new incarnation with `fields` (a new id when none is given). */
export function newConfig(log: LogContext, fields: NewSession): SessionConfig {
  const id = validateId(fields.id ?? log.generateId());
  const now = log.clock();
  return {
    format: 'tailgate.session.v1',
    id,
    ...newIncarnation(now),
    created_at: now.toISOString(),
    instructions: fields.instructions ?? null,
    model: fields.model ?? null,
    strategies: normalizeStrategies(fields.strategies),
    strategy_config: fields.strategy_config ?? {},
    tools: fields.tools ?? [],
    ...(fields.on_busy ? { on_busy: fields.on_busy } : {}),
    metadata: fields.metadata ?? {},
    ...(fields.budget ? { budget: fields.budget } : {}),
    ...(fields.expires_after_days ? { expires_after_days: fields.expires_after_days } : {}),
    ...(fields.webhook_url ? { webhook_url: fields.webhook_url } : {}),
  };
}

/** See SessionLog.get. */
export async function getSession(log: LogContext, id: string): Promise<SessionRecord> {
  const head = await readHead(log, id);
  // With what stopped turns and charges stored: a claim's budget check counts it already (log/charges.ts).
  return toSessionRecord(head.config, countsOf(head.newest), await shownTotals(log, head.scope, head));
}

/** See SessionLog.config. */
export async function sessionConfig(log: LogContext, id: string): Promise<SessionConfig> {
  return (await readConfig(log, id)).config;
}

/** See SessionLog.scope. */
export async function sessionScope(log: LogContext, id: string): Promise<LogScope> {
  return scopeOf(log.keyPrefix, await sessionConfig(log, id));
}

/**
 * Whether a session with an id exists (its config object is there): one head, no parse. The
 * inbox's `sessionExists` port, built where the inbox is (functions/services.ts).
 */
export function sessionExistsIn(store: ObjectStore, keyPrefix: string): (id: string) => Promise<boolean> {
  return async (id) => (await store.head(sessionConfigKey(keyPrefix, id))) !== null;
}

/**
 * The creation time and `incarnation` of session `id` (its config read), or false when there is
 * none: an inbox's `sessionExists` that names the incarnation a notice is posted to
 * (lib/inbox/types.ts `SessionMark`). `check`
 * runs on the config read (as SessionLogOptions.checkConfig on the log's reads): an inbox's
 * `checkedSession`, which a request's bound token's revocation check refuses.
 */
export function sessionCreatedIn(
  store: ObjectStore,
  keyPrefix: string,
  check?: (config: SessionConfig) => void,
): (id: string) => Promise<{ created_at: string; incarnation?: string } | false> {
  return async (id) => {
    const key = sessionConfigKey(keyPrefix, id);
    const object = await store.get(key);
    if (!object) return false;
    const config = parseStored(key, object.body, sessionConfigSchema);
    check?.(config);
    return {
      created_at: config.created_at,
      ...(config.incarnation === undefined ? {} : { incarnation: config.incarnation }),
    };
  };
}

/** See SessionLog.exists. */
export async function sessionExists(log: LogContext, scope: LogScope): Promise<boolean> {
  const object = await log.store.get(sessionConfigKey(scope.keyPrefix, scope.id));
  if (!object) return false;
  return (
    scopeOf(log.keyPrefix, parseStored(sessionConfigKey(scope.keyPrefix, scope.id), object.body, sessionConfigSchema))
      .generation === scope.generation
  );
}

/** See SessionLog.update. */
export async function updateSession(
  log: LogContext,
  id: string,
  fields: SessionPatch,
  check?: (config: SessionConfig) => void,
): Promise<SessionRecord> {
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    const { config, info } = await readConfig(log, id);
    const next: SessionConfig = { ...config, updated_at: log.clock().toISOString() };
    if (fields.instructions !== undefined) next.instructions = fields.instructions;
    if (fields.model !== undefined) next.model = fields.model;
    if (fields.strategies !== undefined) next.strategies = normalizeStrategies(fields.strategies);
    if (fields.strategy_config !== undefined) next.strategy_config = fields.strategy_config ?? {};
    if (fields.tools !== undefined) next.tools = fields.tools ?? [];
    if (fields.metadata !== undefined) next.metadata = fields.metadata ?? {};
    if (fields.budget === null) delete next.budget;
    else if (fields.budget !== undefined) next.budget = fields.budget;
    if (fields.expires_after_days === null) delete next.expires_after_days;
    else if (fields.expires_after_days !== undefined) next.expires_after_days = fields.expires_after_days;
    if (fields.webhook_url === null) delete next.webhook_url;
    else if (fields.webhook_url !== undefined) next.webhook_url = fields.webhook_url;
    if (fields.on_busy === null) delete next.on_busy;
    else if (fields.on_busy !== undefined) next.on_busy = fields.on_busy;
    checkedConfig(next);
    check?.(next);
    const written = await log.store.put(sessionConfigKey(log.keyPrefix, id), JSON.stringify(next), {
      ifMatch: info.etag,
      contentType: 'application/json',
    });
    if (written) {
      const scope = scopeOf(log.keyPrefix, next);
      const read = await readNewest(log, scope);
      const totals = await shownTotals(log, scope, read);
      // Behind an entry of the config before (its read missed a charge, a get failed): read again.
      if ((await writeIndexEntry(log, next, read.newest, false, totals)) === 'behind')
        await refreshIndex(log, id, undefined, false, true).catch(() => undefined);
      return toSessionRecord(next, countsOf(read.newest), totals);
    }
    await backoff(attempt);
  }
  throw new StorageError(`session ${id}: too many concurrent updates`);
}

/**
 * See SessionLog.delete. With `onlyIf`, the session is deleted only when the head this delete
 * reads passes it (the retention sweep's check, on the incarnation it deletes): false when not.
 * A session not found is 404 after a sweep of what no config names, unless `sweepGone` is false
 * (an import's cleanup: another import of the id may be writing, its config not created yet);
 * `{ madeBefore }` sweeps it keeping what generations made since hold (log/sweep.ts, SweepOptions).
 */
export async function deleteSession(
  log: LogContext,
  id: string,
  onlyIf?: (head: Awaited<ReturnType<typeof readHead>>) => boolean,
  sweepGone: boolean | { madeBefore: number } = true,
): Promise<boolean> {
  const configKey = sessionConfigKey(log.keyPrefix, id);
  let head: Awaited<ReturnType<typeof readHead>>;
  try {
    head = await readHead(log, id);
  } catch (error) {
    // Gone already: a delete interrupted after its first step may have left objects.
    if (error instanceof NotFoundError && sweepGone) await sweepSession(log, id, sweepGone === true ? {} : sweepGone);
    throw error;
  }
  if (onlyIf && !onlyIf(head)) return false;
  const { scope } = head;
  // The completion that closes an open turn stays as its fence: the turn's own completion
  // is refused by it (and answered 404) instead of landing where the sweep has been. Its owner
  // in this process is told once the delete ended (`onClosedByOther`): stopped then, it finds
  // the session gone and writes nothing (no notice given back, no listing row) into the sweep.
  const keep = new Set<string>();
  const fenced: ClosedTurn[] = [];
  const quiet: LogContext = { ...log, onClosedByOther: (closed) => void fenced.push(closed) };
  const fence = async (newest: Awaited<ReturnType<typeof readHead>>['newest']) => {
    if (newest?.record.kind !== 'turn' || newest.done) return;
    await closeTurn(
      quiet,
      scope,
      newest.record,
      {
        status: 'failed',
        error: { code: SESSION_DELETED, message: 'the session was deleted' },
      },
      null,
    );
    keep.add(doneKey(scope, newest.record.record));
  };
  try {
    await fence(head.newest);
    // The index entries go before the config (so a delete stopped right after deleting it
    // leaves none) and after it (an entry a background writer put meanwhile).
    await removeIndexEntries(log, head.config);
    await log.store.delete(configKey);
    // An entry a writer puts from now on, its config check not run (its process stopped), is
    // not listed: this marker names its generation (log/index-markers.ts). A failed put fails
    // the delete only after the second removal ran: a retry, finding no config, knows no
    // index position to clean.
    const unmarked = await markDeleted(log, head.config).then(
      () => null,
      (error: unknown) => ({ error }),
    );
    // A turn claimed between the first read and the config's deletion is fenced too.
    await fence((await readNewest(log, scope)).newest);
    await removeIndexEntries(log, head.config);
    if (unmarked) throw unmarked.error;
    await sweepSession(log, id, { keep });
  } finally {
    for (const closed of fenced) log.onClosedByOther?.(closed);
  }
  log.onDeleted?.(scope);
  // A fork gone: its references go, and each ancestor is swept of what no live fork reads now.
  const chain = head.config.fork_of ?? [];
  if (chain.length === 0) return true;
  // And those of every generation of its incarnation a delete of its newest turn left (each put
  // them under the sessions it forked too): younger than a lease, they would keep those alive.
  const left = new Set([...(head.config.queued_in ?? []), ...(head.config.rewound ?? [])]);
  left.delete(scope.generation);
  const parents = chain.filter((point) => point.id !== id);
  await log.store.delete([
    ...forkMarkers(log, chain, id, scope.generation),
    ...[...left].flatMap((generation) => forkMarkers(log, parents, id, generation)),
  ]);
  // An ancestor still alive keeps its objects anyway (its own delete lists the references
  // after this one's are gone): only the deleted ones are swept again.
  for (const point of chain)
    if (!(await namesGeneration(log, point.id, point.generation)))
      await sweepSession(log, point.id, { keepImports: true });
  return true;
}

/**
 * A config about to be stored by a create, a fork or a PATCH, checked against the schema every read of
 * it parses it with (`sessionConfigSchema`): a field it would refuse (a retention of 0 days, a
 * negative budget) is InvalidRequestError naming the field, nothing stored, rather than a
 * session no read takes back. The routes' schemas refuse such fields first.
 */
export function checkedConfig(config: SessionConfig): SessionConfig {
  const parsed = sessionConfigSchema.safeParse(config);
  if (parsed.success) return config;
  const issue = parsed.error.issues[0];
  const field = (issue?.path ?? []).join('.');
  throw new InvalidRequestError(`${field || 'the session'}: ${issue?.message ?? 'refused'}`, { field });
}

export function toSessionRecord(config: SessionConfig, counts: SessionCounts, ledger: Ledger): SessionRecord {
  return {
    id: config.id,
    created_at: config.created_at,
    instructions: config.instructions,
    model: config.model,
    strategies: config.strategies,
    strategy_config: config.strategy_config,
    tools: config.tools,
    on_busy: config.on_busy ?? 'reject',
    metadata: config.metadata,
    ...(config.expires_after_days !== undefined ? { expires_after_days: config.expires_after_days } : {}),
    ...(config.webhook_url !== undefined ? { webhook_url: config.webhook_url } : {}),
    counts: sessionCounts(counts),
    budget: config.budget ?? null,
    usage: sessionUsage(ledger),
    ...forkedFrom(config),
  };
}

/** The session a fork was made from: the first incarnation its history continues in that is not its own. */
function forkedFrom(config: SessionConfig): { forked_from?: { id: string; seq: number } } {
  const parent = config.fork_of?.find((point) => point.id !== config.id);
  return parent ? { forked_from: { id: parent.id, seq: parent.seq } } : {};
}

function normalizeStrategies(value: string | string[] | null | undefined): string[] | null {
  if (value === undefined || value === null) return null;
  return splitStrategyNames(value);
}

/** See SessionLog.tokenBinding. */
export async function tokenBinding(log: LogContext, id: string): Promise<{ generation: number; incarnation: string }> {
  const { config } = await readConfig(log, id);
  return { generation: config.token_generation ?? 0, incarnation: config.incarnation ?? config.generation ?? '' };
}

/** See SessionLog.revokeTokens. */
export async function revokeTokens(log: LogContext, id: string): Promise<number> {
  for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
    const { config, info } = await readConfig(log, id);
    const next: SessionConfig = { ...config, token_generation: (config.token_generation ?? 0) + 1 };
    const written = await log.store.put(sessionConfigKey(log.keyPrefix, id), JSON.stringify(next), {
      ifMatch: info.etag,
      contentType: 'application/json',
    });
    if (written) return next.token_generation!;
    await backoff(attempt);
  }
  throw new StorageError(`session ${id}: too many concurrent updates`);
}
