import type { PromptItem } from '../../items.ts';
import type { LogScope } from '../keys.ts';
import type { LogItem, LogRecord } from '../records.ts';
import type { LogContext } from './context.ts';
import { recordGroups, type Head } from './head.ts';
import { EMPTY_INDEX, indexHolds, knownKeysOf, rememberedIndex, seenBefore, ShardMissingError } from './key-shards.ts';
import type { Base, OpenTurn, ViewPolicy } from './types.ts';

/**
 * Repeat flags: an append's record says of each of its calls whether its call key was seen
 * before it in the history (`repeats`: the view policy's version and `:`, then `1` or `0` per
 * function_call among its items, in order), and a record carrying it keeps them with it. A turn
 * meeting the record after its view then needs no repeat-index shard for those calls
 * (docs/STORAGE.md, **What a cold turn reads**). The flags are facts of the history, whichever
 * view a reader of the same view policy starts from. The appender tells
 * them from the repeat index of the newest view listed (its delta, and the shards of its calls'
 * prefixes, cached or read) and from the calls of the records after that view, which its newest
 * record must carry; a process that does not have that index (it never read nor wrote the view)
 * writes no flags, and a reader of a record without them reads the shards, as before the flags.
 */

type Group = NonNullable<LogRecord['recent']>[number];

/**
 * The call keys of a carried group's items, by view policy (its call keys) and items array (a
 * group is carried as the same array, which the record cache shares between a process's logs).
 */
const groupKeys = new WeakMap<ViewPolicy, WeakMap<readonly LogItem[], string[]>>();

/**
 * The call key of each function_call told here that cannot change (a log item: frozen, or in a
 * carried group), by view policy and item: the view a pack writes holds the items its appends'
 * records did, and its repeat index takes their keys from here rather than hashing them again.
 */
const itemKeys = new WeakMap<ViewPolicy, WeakMap<PromptItem, string>>();

/** The call keys of the function_calls among `items`. */
export function callKeysOf(policy: ViewPolicy, items: readonly PromptItem[], logged = false): string[] {
  let byItem = itemKeys.get(policy);
  if (byItem === undefined) {
    byItem = new WeakMap();
    itemKeys.set(policy, byItem);
  }
  const keys: string[] = [];
  for (const item of items) {
    if (item.type !== 'function_call') continue;
    let key = byItem.get(item);
    if (key === undefined) {
      key = policy.callKey(item.name, item.arguments);
      if (logged || Object.isFrozen(item)) byItem.set(item, key);
    }
    keys.push(key);
  }
  return keys;
}

function groupKeysOf(policy: ViewPolicy, items: readonly LogItem[]): string[] {
  let byItems = groupKeys.get(policy);
  if (byItems === undefined) {
    byItems = new WeakMap();
    groupKeys.set(policy, byItems);
  }
  let keys = byItems.get(items);
  if (keys === undefined) {
    keys = callKeysOf(policy, items, true);
    byItems.set(items, keys);
  }
  return keys;
}

/**
 * The `repeats` of an append of `items` after `newest`, the newest view listed being `view`:
 * undefined when there is no call, or when this process cannot tell them (it does not have the
 * view's index, the newest record does not carry every record after the view, or a shard is gone).
 */
export async function repeatsOf(
  log: LogContext,
  scope: LogScope,
  view: { key: string; record: number } | undefined,
  newest: Head['newest'],
  items: readonly LogItem[],
): Promise<string | undefined> {
  const keys = groupKeysOf(log.viewPolicy, items);
  if (keys.length === 0) return undefined;
  const index = view ? rememberedIndex(log, scope, view.key) : EMPTY_INDEX;
  const viewRecord = view?.record ?? 0;
  const groups = newest ? recordGroups(newest).filter((group) => group.record > viewRecord) : [];
  if (!index || (groups.length > 0 && groups[0]!.record !== viewRecord + 1)) return undefined;
  const after = new Set(groups.flatMap((group) => groupKeysOf(log.viewPolicy, group.items)));
  try {
    const known = await knownKeysOf(
      log,
      scope,
      index,
      keys.filter((key) => !after.has(key)),
    );
    const batch = new Set<string>();
    let repeats = '';
    for (const key of keys) {
      repeats += batch.has(key) || after.has(key) || seenBefore(known, key, true) ? '1' : '0';
      batch.add(key);
    }
    return `${log.viewPolicy.version}:${repeats}`;
  } catch (error) {
    if (error instanceof ShardMissingError) return undefined;
    throw error;
  }
}

/**
 * `recent`, the groups a turn's record carries, with flags for each group after the view of
 * `base` that has none (a turn's input and its model's output: no appender tells them). The
 * claim has read what its base's calls need (the flags of the records after the view, the
 * delta, the shards of the other keys: readBase), so it tells them exactly, and a later turn
 * meeting these records after the view reads no shard for their calls. `keys`: the call keys
 * of `base.since`, in order (callKeysOf).
 */
export function flagCarried(
  policy: ViewPolicy,
  recent: readonly Group[],
  base: Base,
  keys: readonly string[],
): Group[] {
  const viewRecord = base.view?.record ?? 0;
  const firstSeq = base.since[0]?.seq ?? Number.POSITIVE_INFINITY;
  const unflagged = new Set(
    recent.filter(
      (group) => group.record > viewRecord && (group.items[0]?.seq ?? 0) >= firstSeq && !flagsFit(policy, group),
    ),
  );
  if (unflagged.size === 0) return [...recent];
  // Whether each call after the view repeats an earlier call of the history, by seq.
  const repeat = new Map<number, boolean>();
  const seen = new Set<string>();
  let call = 0;
  for (const item of base.since) {
    if (item.type !== 'function_call') continue;
    const key = keys[call++]!;
    repeat.set(item.seq, seen.has(key) || seenBefore(base.known, key, true));
    seen.add(key);
  }
  return recent.map((group) => {
    if (!unflagged.has(group)) return group;
    let bits = '';
    for (const item of group.items) if (item.type === 'function_call') bits += repeat.get(item.seq) ? '1' : '0';
    return bits === '' ? group : { ...group, repeats: `${policy.version}:${bits}` };
  });
}

/**
 * The `repeats` of a turn's completion: of the calls of its record's items and then of
 * `output`, when the turn's process tells them without a read: a key among the calls after the
 * view (`turn.sinceKeys`) or earlier in these, in the view's delta, or in a shard its claim
 * loaded or the process keeps. Undefined when there is no call, or one only a shard read would
 * tell (a new call of the model, in a process that has not read its shard): the next claim
 * reads that shard and flags the group then (flagCarried).
 */
export function turnRepeats(log: LogContext, turn: OpenTurn, output: readonly LogItem[]): string | undefined {
  const keys = callKeysOf(log.viewPolicy, [...turn.inputRecords, ...output]);
  const { sinceKeys, base } = turn;
  if (keys.length === 0 || !sinceKeys) return undefined;
  const batch = new Set<string>();
  let repeats = '';
  for (const key of keys) {
    const repeat =
      batch.has(key) ||
      sinceKeys.has(key) ||
      (base.view ? indexHolds(log, turn.scope, base.view, base.known, key) : false);
    if (repeat === undefined) return undefined;
    repeats += repeat ? '1' : '0';
    batch.add(key);
  }
  return `${log.viewPolicy.version}:${repeats}`;
}

/**
 * What a turn's claim carries (`carried`), flagged (flagCarried), and the call keys of its
 * base (sinceKeysOf); as it is without a base (not a turn) or a newest record.
 */
export function flaggedCarry(
  policy: ViewPolicy,
  base: Base | null,
  newest: Head['newest'],
  carried: Group[],
): { recent: Group[]; sinceKeys?: string[] } {
  if (!base || !newest) return { recent: carried };
  const sinceKeys = sinceKeysOf(policy, base, recordGroups(newest));
  return { recent: flagCarried(policy, carried, base, sinceKeys), sinceKeys };
}

/**
 * The call keys of `base.since`, in order (callKeysOf), `groups` being the newest record's
 * (head.ts recordGroups): those of the records it carries after the view are the ones readBase
 * told already (kept by their items array), so they are not hashed again.
 */
export function sinceKeysOf(policy: ViewPolicy, base: Base, groups: readonly Group[]): string[] {
  const after = groups.filter((group) => group.record > (base.view?.record ?? 0) && group.items.length > 0);
  const walked = base.since.length - after.reduce((sum, group) => sum + group.items.length, 0);
  const first = after[0]?.items[0];
  const last = after.at(-1)?.items.at(-1);
  if (walked < 0 || (first && (base.since[walked] !== first || base.since.at(-1) !== last)))
    return callKeysOf(policy, base.since);
  return [
    ...callKeysOf(policy, base.since.slice(0, walked)),
    ...after.flatMap((group) => groupKeysOf(policy, group.items)),
  ];
}

/** Whether `group` has flags of `policy`, one per call. */
function flagsFit(policy: ViewPolicy, group: Group): boolean {
  const tag = `${policy.version}:`;
  if (!group.repeats?.startsWith(tag)) return false;
  let calls = 0;
  for (const item of group.items) if (item.type === 'function_call') calls += 1;
  return group.repeats.length - tag.length === calls;
}

/**
 * The call keys after a view that need the repeat index's shards (seq order), and the flags
 * that answer for the others: `older` (no flags), then `groups` (records, with or without
 * their flags), then `input`. A key's first call among them decides: flagged, its flag.
 */
export function keysAfterView(
  policy: ViewPolicy,
  older: readonly LogItem[],
  groups: readonly Group[],
  input: readonly PromptItem[],
): { keys: string[]; flags: Map<string, boolean> } {
  const keys: string[] = [];
  const flags = new Map<string, boolean>();
  const seen = new Set<string>();
  const tag = `${policy.version}:`;
  const visit = (callKeys: readonly string[], repeats?: string) => {
    // Flags of another view policy (its call keys may differ), or that do not match the calls,
    // are not used (the shards tell).
    const bits = repeats?.startsWith(tag) ? repeats.slice(tag.length) : undefined;
    const flagged = bits !== undefined && bits.length === callKeys.length;
    callKeys.forEach((key, call) => {
      if (seen.has(key)) return;
      seen.add(key);
      if (flagged) flags.set(key, bits[call] === '1');
      else keys.push(key);
    });
  };
  visit(callKeysOf(policy, older));
  for (const group of groups) visit(groupKeysOf(policy, group.items), group.repeats);
  visit(callKeysOf(policy, input));
  return { keys, flags };
}
