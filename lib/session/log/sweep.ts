import { generationPrefixes, generationSchemaPattern, sessionConfigKey, sessionPrefix } from '../keys.ts';
import { parseStored, sessionConfigSchema } from '../records.ts';
import type { LogContext } from './context.ts';
import { sharedGenerations } from './fork-refs.ts';
import { scopeOf } from './head.ts';

/** What a sweep of a session leaves besides what a config or a live fork names. */
export interface SweepOptions {
  /** Objects it keeps whatever names them (a delete's fence). */
  keep?: ReadonlySet<string>;
  /**
   * While no config exists, the objects of generations made after this time (ms, by the time
   * the generation's name carries, keys.ts newGeneration) are kept: an import before its config
   * writes under a generation made at its start (the retention sweep's, log/retention.ts).
   */
  madeBefore?: number;
  /**
   * While no config exists, the objects of generations an import marked (log/import-pending.ts,
   * `import/<g>/started`) made within IMPORT_KEPT_MS are kept: an import in flight of an id a
   * fork's delete sweeps again (log/config-object.ts, log/fork.ts).
   */
  keepImports?: boolean;
}

/** How long a sweep keeping imports keeps a marked generation (by the time its name carries). */
export const IMPORT_KEPT_MS = 24 * 60 * 60 * 1000;

/**
 * Deletes every object under a session's prefix that no current config names (but `keep`),
 * except the generations a live fork reads (their references are listed first: a fork
 * referencing one later has seen this id's config gone, and gives up).
 */
export async function sweepSession(log: LogContext, id: string, options: SweepOptions = {}): Promise<void> {
  const { keep = new Set<string>(), madeBefore } = options;
  const configKey = sessionConfigKey(log.keyPrefix, id);
  const prefix = sessionPrefix(log.keyPrefix, id);
  const { shared, pending } = await sharedGenerations(log, id);
  const now = log.clock().getTime();
  let cursor: string | undefined;
  for (;;) {
    const page = await log.store.list(prefix, { limit: 1000, ...(cursor ? { cursor } : {}) });
    // Listed after the objects and before the config's read: an import's mark, its first write,
    // lands before any of them, and goes only once its config exists or its import gave up, so
    // a config not there at the read below was not there when the marks were listed either.
    const marked = options.keepImports ? await importMarks(log, prefix) : new Set<string>();
    // Read after the listing: an object listed under a generation a config names now was
    // written by that incarnation, whatever happened before.
    const current = await log.store.get(configKey);
    const config = current ? parseStored(configKey, current.body, sessionConfigSchema) : null;
    const generation = config ? scopeOf(log.keyPrefix, config).generation : null;
    const importing = (key: string, level: string) =>
      marked.has(level) && madeSince(log, id, key, level, now - IMPORT_KEPT_MS);
    // The generations of this id the config reads (a delete of the newest turn committed since
    // the references were listed): its history, whatever the listing of references said.
    // So are those a flattened history names (log/flatten.ts): a turn closed there is still charged.
    const read = new Set(
      [...(config?.fork_of ?? []).filter((point) => point.id === id), ...(config?.named ?? [])].map(
        (point) => point.generation,
      ),
    );
    const keys = page.objects
      .map((object) => object.key)
      .filter((key) => {
        const level = key.slice(prefix.length).split('/')[1] ?? '';
        if (key === configKey || keep.has(key) || shared.has(level) || read.has(level)) return false;
        // While the session exists, a delete of its newest turn may be writing its next generation.
        if (config === null)
          return !importing(key, level) && (madeBefore === undefined || !madeSince(log, id, key, level, madeBefore));
        // Inputs queued under a generation a delete of the newest turn left, the keys telling
        // which were taken up there, and their images and files are still the session's (log/queue.ts).
        if (
          config.queued_in?.includes(level) &&
          /^(queue(_cleared|_taking)?|idem|blob)\//.test(key.slice(prefix.length))
        )
          return false;
        // Charges a delete of the newest turn left owed, until a write carried them (log/owed-charges.ts).
        if (config.carry_from?.includes(level) && key.slice(prefix.length).startsWith(`turn/${level}/-charge-`))
          return false;
        return !pending.has(level) && isOtherGeneration(key.slice(prefix.length), generation!, config.created_at);
      });
    if (keys.length > 0) await log.store.delete(keys);
    if (!page.truncated || !page.cursor) break;
    cursor = page.cursor;
  }
}

/** The generations with an import's mark under a session's `prefix`. */
async function importMarks(log: LogContext, prefix: string): Promise<Set<string>> {
  const marked = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await log.store.list(`${prefix}import/`, { limit: 1000, ...(cursor ? { cursor } : {}) });
    for (const { key } of page.objects) {
      const [, level = '', name] = key.slice(prefix.length).split('/');
      if (name === 'started') marked.add(level);
    }
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return marked;
}

/**
 * Whether `key`, under session `id`'s prefix at `level`, is an object an import writes before its
 * config (keys.ts generationPrefixes) of a generation made after `time` (keys.ts newGeneration).
 */
function madeSince(log: LogContext, id: string, key: string, level: string, time: number): boolean {
  if (!generationSchemaPattern.test(level) || 10_000_000_000_000 - Number(level.slice(1, 14)) <= time) return false;
  return generationPrefixes({ keyPrefix: log.keyPrefix, id, generation: level }).some((at) => key.startsWith(at));
}

/**
 * Whether a key under a session's prefix (`rest`, the part after it) belongs to anything but
 * the incarnation `generation`: id-level objects (the inbox) and other generations' objects.
 */
function isOtherGeneration(rest: string, generation: string, createdAt: string): boolean {
  const [kind, level = ''] = rest.split('/');
  if (kind === 'inbox' || kind === 'inbox_removed' || kind === 'inbox_unreadable') return false;
  // Response objects (lib/openai/stored-responses.ts) are named by the incarnation's creation
  // time, which a delete of its newest turn keeps (log/rewind.ts); a chat completion's abort is
  // the id's (keys.ts chatAbortKey), its body naming the incarnation.
  if (kind === 'openai') return level !== 'chat-aborted.json' && level !== String(Date.parse(createdAt));
  // A config written before generations keeps its objects without the level.
  if (generation === '') return generationSchemaPattern.test(level);
  return level !== generation;
}
