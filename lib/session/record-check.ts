import { z } from 'zod';
import { hasPlainFields } from './export-format.ts';
import { logItemSchema, parseStored, recordSchema, validateStored, type LogItem, type LogRecord } from './records.ts';

/**
 * A record read back (`turn/<inverted record>`), its items checked without the schema where they
 * have the shape a commit writes them (lib/session/log/commit.ts): a record is mostly its items
 * and those of the records it carries, which the schema copies key by key, at a cost a process
 * new to a session pays for each record it reads (a warm one takes them from the record cache,
 * lib/session/log/record-cache.ts). What passes here is what `recordSchema` passes and gives, key
 * for key and in order (property-tested in test/session/record-check.test.ts), so such items are
 * taken as they are; an item of another shape goes through the item schema, and the rest of the
 * record (small) through the record schema. Anything else not a record is a CorruptObjectError,
 * as `parseStored` with `recordSchema` gives it.
 */
export function storedRecord(key: string, body: Uint8Array): LogRecord {
  const value = parseStored(key, body, z.unknown());
  return checkedRecord(value) ?? validateStored(key, value, recordSchema);
}

/** The record `value` holds as `recordSchema` gives it, or null for the schema to tell (its output or its error). */
export function checkedRecord(value: unknown): LogRecord | null {
  if (!isObject(value) || !Array.isArray(value.items)) return null;
  const { recent } = value;
  if (recent !== undefined && !(Array.isArray(recent) && recent.every((group) => isObject(group)))) return null;
  const items = checkedItems(value.items);
  const groups = ((recent ?? []) as Record<string, unknown>[]).map((group) => checkedItems(group.items));
  if (!items || groups.some((group) => group === null)) return null;
  // The rest with no items: the schema checks and copies what is left, a few fields.
  const shell = recordSchema.safeParse({
    ...value,
    items: [],
    ...(recent !== undefined
      ? { recent: (recent as Record<string, unknown>[]).map((group) => ({ ...group, items: [] })) }
      : {}),
  });
  if (!shell.success) return null;
  const record = shell.data;
  record.items = items;
  if (record.recent) record.recent = record.recent.map((group, index) => ({ ...group, items: groups[index]! }));
  return record;
}

/** Items as `z.array(logItemSchema)` gives them, or null when it would refuse them. */
function checkedItems(items: unknown): LogItem[] | null {
  if (!Array.isArray(items)) return null;
  const checked: LogItem[] = [];
  for (const item of items) {
    if (plainItem(item)) checked.push(item);
    else {
      const parsed = logItemSchema.safeParse(item);
      if (!parsed.success) return null;
      checked.push(parsed.data as LogItem);
    }
  }
  return checked;
}

/** The keys of each item shape taken as it is, in the schema's order (an output kept out of line is not). */
const ITEM_KEYS: Record<string, readonly string[]> = {
  message: ['type', 'role', 'content', 'seq', 'created_at'],
  function_call: ['type', 'call_id', 'name', 'arguments', 'seq', 'created_at'],
  function_call_output: ['type', 'call_id', 'output', 'seq', 'created_at'],
};

function plainItem(value: unknown): value is LogItem {
  if (!isObject(value) || typeof value.type !== 'string' || !Object.hasOwn(ITEM_KEYS, value.type)) return false;
  const expected = ITEM_KEYS[value.type]!;
  const keys = Object.keys(value);
  if (keys.length !== expected.length || keys.some((key, index) => key !== expected[index])) return false;
  return hasPlainFields(value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
