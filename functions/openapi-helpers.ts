import { z } from 'zod';
import { errorSchema } from './schemas.ts';

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid_request or unknown_strategy',
  401: 'unauthorized',
  402: 'budget_exhausted',
  403: 'forbidden',
  404: 'not_found',
  409:
    'session_exists, name_taken, inbox_full, turn_in_progress (with Retry-After), aborted, lease_expired, ' +
    'turn_cancelled, turn_not_open or queued_input_taken',
  413: 'payload_too_large or context_too_large',
  422: 'idempotency_key_reused',
  429: 'rate_limited (with Retry-After)',
  500: 'corrupt_object or internal_error',
  502: 'model_error',
  503: 'not_configured, storage_error or storage_unsupported',
  504: 'model_timeout',
};

/** A required JSON request body. */
export function jsonBody<Schema extends z.ZodType>(schema: Schema) {
  return { required: true, content: { 'application/json': { schema } } } as const;
}

/**
 * The body of a route that takes no fields (a cancel, a revoke): none, or `{}`. A field sent is
 * refused as unknown, as every request object's is (docs/API.md, "Conventions").
 */
export const noFieldsBody = {
  required: false,
  content: { 'application/json': { schema: z.object({}).strict().meta({ id: 'NoFields' }) } },
} as const;

/** A JSON response of `schema`. */
export function jsonResponse<Schema extends z.ZodType>(schema: Schema, description: string) {
  return { description, content: { 'application/json': { schema } } } as const;
}

/** The error responses a route documents, all with the API's error shape. */
export function errorResponses<const Status extends number>(
  ...statuses: Status[]
): Record<Status, { description: string; content: { 'application/json': { schema: typeof errorSchema } } }> {
  const responses = {} as Record<
    Status,
    { description: string; content: { 'application/json': { schema: typeof errorSchema } } }
  >;
  for (const status of statuses) responses[status] = jsonResponse(errorSchema, ERROR_DESCRIPTIONS[status] ?? 'error');
  return responses;
}

/** The `Idempotency-Key` header of a route that takes one (docs/API.md, Conventions: Headers). */
export function idempotencyKeyHeaders(description?: string) {
  const key = z.string().min(1).max(256).optional();
  return z.object({ 'idempotency-key': description === undefined ? key : key.meta({ description }) });
}
