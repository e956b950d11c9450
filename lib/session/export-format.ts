import { z } from 'zod';
import { InvalidRequestError } from '../errors.ts';
import { idSchema, storedItemSchema, toolSchema } from '../items.ts';
import { MAX_TTL_DAYS } from './fields.ts';
import { contextStartSchema } from './records.ts';

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
    strategies: z.array(z.string().min(1).max(100)).max(50).nullable(),
    strategy_config: z.record(z.string(), z.number()),
    tools: z.array(toolSchema).max(512),
    metadata: z.record(z.string(), z.unknown()),
    /** Present when the session sets its own retention. */
    expires_after_days: z.number().int().min(1).max(MAX_TTL_DAYS).optional(),
  })
  .strict()
  .meta({ id: 'ExportHeader' });
export type ExportHeader = z.infer<typeof exportHeaderSchema>;

/** An item line: a stored item with its seq and creation time. */
export const exportItemSchema = storedItemSchema;

/** The current context start, without the record it was computed at (an import numbers its own). */
export const exportCompactionSchema = contextStartSchema
  .omit({ base_record: true })
  .extend({ type: z.literal('compaction') })
  .strict()
  .meta({ id: 'ExportCompaction' });
export type ExportCompaction = z.infer<typeof exportCompactionSchema>;

/** A delivered notice: its delivery record in `inbox_removed/` (GET .../inbox/delivered) and its content. */
export const exportNoticeSchema = z
  .object({
    type: z.literal('notice'),
    stored_as: z
      .string()
      .min(1)
      .max(220)
      .regex(/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/),
    name: z.string().min(1).max(1024),
    posted_at: z.iso.datetime({ offset: true }),
    delivered_at: z.iso.datetime({ offset: true }),
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
  const issue = parsed.error.issues[0];
  const field = [`line ${line}`, ...(issue?.path ?? []).map(String)].join('.');
  throw new InvalidRequestError(`${field}: ${issue?.message ?? 'invalid'}`, { field });
}
