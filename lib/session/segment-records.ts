import { z } from 'zod';
import {
  contextStartSchema,
  countsSchema,
  errorSchema,
  openCallsSchema,
  overflowBoundarySchema,
  turnStatusSchema,
} from './records.ts';

/** The schemas of a segment's lines and index (lib/session/segment.ts reads them, segment-build.ts writes them). */

/**
 * A JSON object of call ids (client-chosen, so `constructor` or `__proto__` as well) to positive
 * seqs, read into an object without a prototype: each key of the JSON is an own key, `__proto__`
 * too (a copy by z.record leaves it out), and no other key reads as one.
 */
const callIdSeqsSchema = z
  .custom<Record<string, number>>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      !Array.isArray(value) &&
      Object.values(value).every((seq) => Number.isSafeInteger(seq) && (seq as number) > 0),
    { message: 'expected an object of call ids to positive seqs' },
  )
  .transform((value): Record<string, number> => Object.assign(Object.create(null), value));

/** One model turn's outcome inside a segment (what replay needs once the record is packed). */
export const segmentTurnSchema = z
  .object({
    record: z.number().int().positive(),
    turn: z.number().int().positive(),
    status: turnStatusSchema,
    idempotency_key_sha256: z.string().optional(),
    response: z.unknown().optional(),
    error: errorSchema.optional(),
    /** What turn listings need once the record is packed (absent in older segments). */
    started_at: z.string().optional(),
    completed_at: z.string().optional(),
    first_seq: z.number().int().positive().optional(),
    input_count: z.number().int().nonnegative().optional(),
    output_count: z.number().int().nonnegative().optional(),
    receipt: z.unknown().optional(),
    /** A streamed or background turn's (its record said so): it has an event journal however it ended. */
    journaled: z.literal(true).optional(),
  })
  .strict();
export type SegmentTurn = z.infer<typeof segmentTurnSchema>;

/**
 * One packed record's closing state (a line of a segment's states section): what a fork at
 * that record starts from. `context` is written where it changed and on the first line (null:
 * none); absent, it is the line before's.
 */
export const segmentStateSchema = z
  .object({
    record: z.number().int().positive(),
    /** A model turn's ordinal (absent for appends and compactions). */
    turn: z.number().int().positive().optional(),
    counts: countsSchema,
    context: contextStartSchema.nullable().optional(),
    overflow: overflowBoundarySchema.optional(),
    open_calls: openCallsSchema.optional(),
  })
  .strict();
export type SegmentStateLine = z.infer<typeof segmentStateSchema>;

/**
 * The index at the end of a segment. Sections hold one JSON line per entry, in seq order:
 * `turns` (model turn outcomes, read only for replay), `tools` (function_call and
 * function_call_output items), `messages` (message items). Tail reads fetch the index and the
 * messages from the end with a Range request and only as much of `tools` as they need.
 */
export const segmentIndexSchema = z
  .object({
    /** v2 adds the states section (`states`); v1 segments have none. */
    format: z.enum(['tailgate.segment.v1', 'tailgate.segment.v2']),
    first_record: z.number().int().positive(),
    last_record: z.number().int().positive(),
    first_seq: z.number().int().positive(),
    last_seq: z.number().int().nonnegative(),
    turns: z
      .object({
        offset: z.number().int().nonnegative(),
        records: z.array(z.number().int()),
        ends: z.array(z.number().int()),
      })
      .strict(),
    /**
     * The tools section: `count` lines; `marks[k]` is the end offset of line 32k+31, so any
     * run of lines is one range request (rounded out to blocks of 32 lines). Their seqs are
     * the seqs of the segment that are not messages.
     */
    tools: z
      .object({
        offset: z.number().int().nonnegative(),
        count: z.number().int().nonnegative(),
        marks: z.array(z.number().int().nonnegative()),
      })
      .strict(),
    /** Seqs of function_calls with no output of their call_id later in this segment. */
    unmatched: z.array(z.number().int().positive()),
    /** call_id -> seq of the first output in this segment whose call is in an older one. */
    orphans: callIdSeqsSchema,
    messages: z
      .object({
        offset: z.number().int().nonnegative(),
        length: z.number().int().nonnegative(),
        count: z.number().int().nonnegative(),
      })
      .strict(),
    /**
     * How many messages before `first_seq` the messages section starts with: all of them, so
     * a tail read can stop here (null when they were too large to carry).
     */
    carried: z.number().int().nonnegative().nullable(),
    /** v2: the states section starts the segment and holds one line per record (segmentStateSchema). */
    states: z.number().int().positive().optional(),
  })
  .strict();
export type SegmentIndex = z.infer<typeof segmentIndexSchema>;
