import { z } from 'zod';

/** The query strings of the OpenAI-compatible routes: listings, a retrieve's replay, `include`. */

/** A whole number in a query, in decimal digits (a `-` first where `negative`): no hex, exponent, point or space. */
const integerText = (name: string, negative = false) =>
  z
    .string()
    .regex(
      negative ? /^-?[0-9]{1,16}$/ : /^[0-9]{1,16}$/,
      `${name} must be ${negative ? 'an' : 'a non-negative'} integer of at most 16 digits`,
    )
    .transform(Number);

/**
 * An event's sequence_number (`starting_after` from -1, `Last-Event-ID`): `integerText` that is a safe integer
 * (digits only, so whole: no `int()`, whose own bound would answer first), as the native events route reads its
 * `after` (functions/routes/events.ts).
 */
const sequenceText = (name: string, min: number) =>
  integerText(name, min < 0).pipe(
    z.number().min(min).max(Number.MAX_SAFE_INTEGER, `${name} must be at most ${Number.MAX_SAFE_INTEGER}`),
  );

/**
 * `include` (extra item fields such as logprobs or image URLs): the values a create takes.
 * `message.output_text.logprobs`, which every output_text carries anyway (a listed item's `[]`:
 * the items keep no log probabilities, the response object does), and
 * `reasoning.encrypted_content`, which a stored response's reasoning items carry none of, as its
 * create answers them (its conversation keeps the payload and sends it back itself); tailgate has
 * no other field to add.
 */
const INCLUDABLE = ['message.output_text.logprobs', 'reasoning.encrypted_content'];
const includable = z
  .union([z.string(), z.array(z.string())])
  .optional()
  .refine((value) => [value ?? []].flat().every((entry) => INCLUDABLE.includes(entry)), {
    error: 'only "message.output_text.logprobs" and "reasoning.encrypted_content" are supported',
  });
export const includeQuerySchema = z.object({ include: includable, 'include[]': includable });

/** A page of items: a response's `input_items` and a conversation's item list (neither adds any `include` field). */
export const itemListQuerySchema = z.object({
  limit: integerText('limit').pipe(z.number().int().min(1).max(100)).optional(),
  order: z.enum(['asc', 'desc']).optional(),
  after: z.string().max(200).optional(),
  ...includeQuerySchema.shape,
});
export type ItemListQuery = z.infer<typeof itemListQuerySchema>;

const booleanText = z.enum(['true', 'false']).transform((value) => value === 'true');

/** `responses.retrieve(id, {stream, starting_after})`: a background or streamed response's events, replayed. */
export const retrieveQuerySchema = z.object({
  stream: booleanText.optional().meta({ param: { name: 'stream', in: 'query' } }),
  starting_after: sequenceText('starting_after', -1)
    .optional()
    .meta({
      param: { name: 'starting_after', in: 'query' },
      description: 'Send the events after this sequence_number.',
    }),
  include_obfuscation: booleanText
    .optional()
    .meta({ param: { name: 'include_obfuscation', in: 'query' }, description: 'Advisory: no event is obfuscated.' }),
  ...includeQuerySchema.shape,
});

/**
 * The `Last-Event-ID` an EventSource reconnecting to a retrieve's stream sends: the sequence_number
 * of the last event it got (each event's SSE id; an end no stream sent live has that number plus
 * 100,001: lib/openai/sse.ts), as the native events route reads it.
 */
export const retrieveHeadersSchema = z.object({
  'last-event-id': sequenceText('Last-Event-ID', 0)
    .optional()
    .meta({ description: 'Send the events after this sequence_number, or after starting_after when that is later.' }),
});
