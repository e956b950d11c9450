import { z } from 'zod';
import { messageItemSchema } from '../items.ts';
import { validateStored } from './records.ts';
import { viewItemSchema, viewSchema, type LogView } from './view-records.ts';

/**
 * Validates a view read back (lib/session/view-records.ts `viewSchema`) as `validateStored` does,
 * with its tail's items, nearly all of its bytes, checked without the schema when they have the
 * shape a view writes (keys in the schema's order, string content and output, no `output_ref`):
 * what passes is what the schema passes and would copy key for key, so each such item is its
 * own result (as lib/session/export-format.ts does for item lines). Anything else, or any item
 * not of that shape, goes through the whole schema, for its result or its error: the two agree
 * (test/session/view-parse.test.ts).
 */
export function validateView(key: string, value: unknown): LogView {
  const skeleton = viewSkeletonSchema.safeParse(value);
  if (skeleton.success && (skeleton.data.tail === null || skeleton.data.tail.items.every(isPlainViewItem)))
    return skeleton.data as LogView;
  return validateStored(key, value, viewSchema);
}

/** The view schema with the tail's items left unchecked (validateView checks them). */
const tailSchema = viewSchema.shape.tail.unwrap();
const viewSkeletonSchema = viewSchema.extend({
  tail: tailSchema.extend({ items: z.array(z.unknown()) }).nullable(),
});

/** `call_id` and `name`: 1 to 256 UTF-16 units, as the item schemas bound them. */
const MAX_NAME_LENGTH = 256;
const ROLES = new Set<unknown>(messageItemSchema.shape.role.options);
const isName = (value: unknown) => typeof value === 'string' && value.length >= 1 && value.length <= MAX_NAME_LENGTH;

/** The check of each field the fast path knows; a field of the schema not here sends an item to the schema. */
const FIELD_CHECKS: Record<string, (value: unknown) => boolean> = {
  role: (value) => ROLES.has(value),
  content: (value) => typeof value === 'string',
  output: (value) => typeof value === 'string',
  call_id: isName,
  name: isName,
  arguments: (value) => typeof value === 'string',
  seq: (value) => Number.isSafeInteger(value) && (value as number) >= 1,
  created_at: (value) => typeof value === 'string',
  compacted: (value) => value === true,
  behind: (value) => value === true,
};

/** Per item type, its fields in the schema's order, and whether each may be absent. */
const ITEM_FIELDS = new Map(
  viewItemSchema.options.map((option) => {
    const shape = option.shape as Record<string, z.ZodType>;
    const fields = Object.keys(shape)
      .filter((field) => field !== 'type')
      .map((field) => ({ field, optional: shape[field]!.safeParse(undefined).success, check: FIELD_CHECKS[field] }));
    return [option.shape.type.value as string, fields] as const;
  }),
);

/** Whether `value` is a view item of the plain shape: the schema accepts it and gives it back key for key. */
export function isPlainViewItem(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const item = value as Record<string, unknown>;
  const fields = ITEM_FIELDS.get(item.type as string);
  if (!fields) return false;
  const keys = Object.keys(item);
  if (keys[0] !== 'type') return false;
  let at = 1;
  for (const { field, optional, check } of fields) {
    if (keys[at] !== field) {
      if (optional) continue;
      return false;
    }
    if (!check?.(item[field])) return false;
    at += 1;
  }
  return at === keys.length;
}
