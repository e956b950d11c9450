import { z } from 'zod';
import { InvalidRequestError } from '../errors.ts';
import { bracketSegments, pathDetails } from '../field-path.ts';
import { answeredIssue } from '../validation-issue.ts';
import { idSchema, messageItemSchema, storedItemSchema, toolSchema, type StoredItem } from '../items.ts';
import { budgetSchema, suppliedLedgerSchema } from '../ledger/usage.ts';
import { MAX_STRATEGIES, MAX_TTL_DAYS, onBusySchema } from './fields.ts';
import { contextStartSchema } from './records.ts';
import { utf8Bytes } from './item-size.ts';

/**
 * The lines of a session export (docs/API.md, "Export and import"): JSON Lines, one value per
 * line, in this order:
 *
 * 1. the header (`type: "session"`): the session's config;
 * 2. every item, seq 1 first, as `GET .../items` shows it (payloads whole, never `output_ref`);
 * 3. the current compaction (`type: "compaction"`), when the session has one;
 * 4. the delivered-notice records (`type: "notice"`), in `stored_as` byte order.
 *
 * `POST /v1/sessions/import` takes the same lines, and exporting what it stored gives the same
 * bytes again.
 */

export const EXPORT_FORMAT = 'tailgate.export.v1';

export const exportHeaderSchema = z
  .object({
    type: z.literal('session'),
    format: z.literal(EXPORT_FORMAT),
    id: idSchema,
    created_at: z.iso.datetime({ offset: true }),
    instructions: z.string().nullable(),
    model: z.string().min(1).max(200).nullable(),
    strategies: z.array(z.string().min(1).max(100)).max(MAX_STRATEGIES).nullable(),
    strategy_config: z.record(z.string(), z.number()),
    tools: z.array(toolSchema).max(512),
    metadata: z.record(z.string(), z.unknown()),
    /** Present when the session sets its own retention. */
    expires_after_days: z.number().int().min(1).max(MAX_TTL_DAYS).optional(),
    /** Present when the session sets its busy policy. */
    on_busy: onBusySchema.optional(),
    /** Present when the session has a budget. */
    budget: budgetSchema.optional(),
    /** The usage totals of the turns counted so far (what the budget limits), present once a turn was counted. */
    ledger: suppliedLedgerSchema.optional(),
  })
  .strict()
  .meta({ id: 'ExportHeader' });
export type ExportHeader = z.infer<typeof exportHeaderSchema>;

/** An item line: a stored item with its seq and creation time. */
export const exportItemSchema = storedItemSchema;

/** The current context start, without the record it was computed at (an import numbers its own). */
export const exportCompactionSchema = contextStartSchema
  .omit({ base_record: true, generation: true })
  .extend({ type: z.literal('compaction') })
  .strict()
  .meta({ id: 'ExportCompaction' });
export type ExportCompaction = z.infer<typeof exportCompactionSchema>;

/**
 * The most UTF-8 bytes of an imported notice's `name`: a posted name's most, 200 characters of
 * ASCII (lib/inbox/notice-name.ts noticeNameSchema), so that a direct writer's, of any
 * characters, fits the store as a posted one does: percent-encoded in its record's metadata
 * (S3 takes 2 KB of it) and, as `stored_as`, in its key (1,024 bytes with the key prefix, the
 * session's and the decision keys a chain writes under it, lib/inbox/decision-chain.ts).
 */
export const MAX_NOTICE_NAME_BYTES = 200;
/** The most UTF-8 bytes of an imported `stored_as`: such a name in its slot, `.1` ... `.999999999`. */
export const MAX_STORED_AS_BYTES = MAX_NOTICE_NAME_BYTES + 10;

/**
 * A notice's `posted_at` or `delivered_at`: an ISO time of at most 9 fractional-second digits (the
 * service writes 3). Its delivery record holds it in metadata (S3 takes 2 KB of it), so a time of
 * any length would be a storage error there; the inbox reads a longer one in metadata as absent
 * (lib/inbox/delivery-records.ts validTime), so every export it writes imports.
 */
export const noticeTimeSchema = z.iso
  .datetime({ offset: true })
  .refine((time) => !/\.\d{10}/.test(time), 'must have at most 9 fractional-second digits');

/** A string of 1 to `max` UTF-8 bytes (at most `max` characters, each one byte or more). */
function utf8Name(max: number) {
  return z
    .string()
    .min(1)
    .max(max)
    .refine((name) => utf8Bytes(name) <= max, `must have at most ${max} bytes (UTF-8)`);
}

/**
 * The metadata on a delivery record an import wrote (lib/inbox/transfer.ts) naming the generation
 * of the session it imported: an import that fails finds its records by it (log/import.ts).
 */
export const IMPORTED_IN_META = 'imported-in';

/** A delivered notice: its delivery record in `inbox_removed/` (GET .../inbox/delivered) and its content. */
export const exportNoticeSchema = z
  .object({
    type: z.literal('notice'),
    // Any name a notice can have in the inbox, the API's or a direct writer's (lib/inbox/notice-name.ts
    // isNoticeName) of as many bytes as the API's has characters, and its slots.
    stored_as: utf8Name(MAX_STORED_AS_BYTES).refine(
      (name) => !name.startsWith('.') && !name.includes('/'),
      'must not start with "." or hold "/"',
    ),
    name: utf8Name(MAX_NOTICE_NAME_BYTES),
    posted_at: noticeTimeSchema,
    delivered_at: noticeTimeSchema,
    turn: z.number().int().nonnegative().nullable(),
    content: z.string(),
  })
  .strict()
  .meta({ id: 'ExportNotice' });
export type ExportNotice = z.infer<typeof exportNoticeSchema>;

/** Validates line `line` of an import; anything else is a 400 naming the line and the field. */
export function parseExportLine<Schema extends z.ZodType>(
  line: number,
  value: unknown,
  schema: Schema,
): z.infer<Schema> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  // Answered as a body's refusal is (its innermost field, `required`, `unknown field`), under the line.
  const issue = answeredIssue(parsed.error, value);
  const path = [`line ${line}`, ...(issue?.path ?? []).filter((key) => typeof key !== 'symbol')];
  const field = path.join('.');
  throw new InvalidRequestError(
    `${field}: ${issue?.message ?? 'invalid'}`,
    pathDetails({ field }, bracketSegments(path)),
  );
}

/**
 * Validates an item line as `parseExportLine` with `exportItemSchema` does. The shape an export
 * writes (keys in the schema's order, a string payload) is checked here without the schema: what
 * passes is what the schema passes and would copy key for key, so the line's value is the item.
 * Anything else goes through the schema, for its output or its error.
 */
export function parseExportItem(line: number, value: unknown): StoredItem {
  return isPlainItem(value) ? value : parseExportLine(line, value, exportItemSchema);
}

/**
 * The keys of each item type, in the schema's order, but `reasoning` and `incomplete` (an item
 * with one takes the schema).
 */
const ITEM_KEYS = new Map(
  exportItemSchema.options.map(
    (option) =>
      [
        option.shape.type.value,
        Object.keys(option.shape).filter((k) => k !== 'reasoning' && k !== 'incomplete'),
      ] as const,
  ),
);
const ROLES = new Set<unknown>(messageItemSchema.shape.role.options);
/** `call_id` and `name`: 1 to 256 UTF-16 units, as the item schemas bound them. */
const MAX_NAME_LENGTH = 256;

function isPlainItem(value: unknown): value is StoredItem {
  if (typeof value !== 'object' || value === null) return false;
  const item = value as Record<string, unknown>;
  const expected = ITEM_KEYS.get(item.type as StoredItem['type']);
  if (!expected) return false;
  const keys = Object.keys(item);
  if (keys.length !== expected.length || keys.some((key, index) => key !== expected[index])) return false;
  return hasPlainFields(item);
}

/**
 * Whether the fields of an item whose keys were checked are as its schema takes them, with a
 * string payload: seq, created_at, role, call_id, name, arguments, output (lib/session/view-check.ts
 * takes view items so too).
 */
export function hasPlainFields(item: Record<string, unknown>): boolean {
  if (!Number.isSafeInteger(item.seq) || (item.seq as number) < 1 || typeof item.created_at !== 'string') return false;
  if (item.type === 'message') return ROLES.has(item.role) && typeof item.content === 'string';
  if (!isName(item.call_id)) return false;
  if (item.type === 'function_call') return isName(item.name) && typeof item.arguments === 'string';
  return typeof item.output === 'string';
}

function isName(value: unknown): boolean {
  return typeof value === 'string' && value.length >= 1 && value.length <= MAX_NAME_LENGTH;
}
