import { z } from 'zod';
import { budgetSchema, type Budget } from './ledger/usage.ts';

/**
 * How lib/config.ts reads a variable's text: blank is unset, secrets are trimmed, numbers and
 * booleans are parsed from text, a token signing key must be strong enough.
 */

/** Unset and blank are the same: `API_TOKEN=""` means no token. */
export function optionalText() {
  return z.preprocess(
    (value) => (typeof value === 'string' && value.trim() === '' ? undefined : value),
    z.string().optional(),
  );
}

/** A secret, trimmed: whitespace or a newline pasted around it is not part of it. */
export function secretText() {
  return z.preprocess(
    (value) => (typeof value === 'string' ? (value.trim() === '' ? undefined : value.trim()) : value),
    z.string().optional(),
  );
}

/** Bytes a token signing key must hold: 256 bits, HS256's own strength. */
const MIN_SIGNING_KEY_BYTES = 32;

/**
 * A token signing key: base64 or base64url text (padding optional) of at least
 * {@link MIN_SIGNING_KEY_BYTES} random bytes, as `openssl rand -base64 32` prints. The text
 * itself (its UTF-8) is the HS256 key, as JWT libraries take a secret string; the rule only
 * makes sure the text carries 256 random bits. Bytes that repeat too much (fewer than 16
 * distinct values, which 32 random bytes all but never give) are refused as not random.
 */
export function signingKeyText() {
  return secretText().superRefine((text, context) => {
    if (text === undefined) return;
    const bytes = base64Bytes(text);
    const problem =
      bytes === null
        ? 'is not base64 or base64url text'
        : bytes.length < MIN_SIGNING_KEY_BYTES
          ? `decodes to ${bytes.length} bytes, fewer than ${MIN_SIGNING_KEY_BYTES}`
          : new Set(bytes).size < 16
            ? 'repeats its bytes too much to be random'
            : null;
    if (problem === null) return;
    context.addIssue({
      code: 'custom',
      message:
        `must be at least ${MIN_SIGNING_KEY_BYTES} random bytes in base64 or base64url ` +
        '(generate one with `openssl rand -base64 32`); this one ' +
        problem,
    });
  });
}

/**
 * A Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 random bytes, as
 * `echo "whsec_$(openssl rand -base64 32)"` prints (the prefix may be left out).
 */
export function webhookSecretText() {
  return secretText().superRefine((text, context) => {
    if (text === undefined) return;
    const digits = text.replace(/^whsec_/, '');
    const bytes = /^[A-Za-z0-9+/]+={0,2}$/.test(digits) && digits.length % 4 === 0 ? base64Bytes(digits) : null;
    if (bytes && bytes.length >= 24 && bytes.length <= 64) return;
    context.addIssue({
      code: 'custom',
      message: 'must be whsec_ and the base64 of 24 to 64 random bytes (`echo "whsec_$(openssl rand -base64 32)"`)',
    });
  });
}

/** The bytes of base64 or base64url text (padding optional), null when it is neither. */
function base64Bytes(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return null;
  const digits = text.replace(/=+$/, '').replaceAll('-', '+').replaceAll('_', '/');
  if (digits.length % 4 === 1) return null;
  return Uint8Array.from(atob(digits.padEnd(Math.ceil(digits.length / 4) * 4, '=')), (char) => char.charCodeAt(0));
}

/** The longest a timer waits (2^31 - 1 ms): setTimeout fires a longer one at once. */
export const MAX_TIMER_MS = 2_147_483_647;

export function positiveInteger(fallback: number, max = Number.MAX_SAFE_INTEGER) {
  return z.preprocess(numberText, wholeNumber().positive().max(max).default(fallback));
}

export function nonNegativeInteger(fallback: number, max = Number.MAX_SAFE_INTEGER) {
  return z.preprocess(numberText, wholeNumber().min(0).max(max).default(fallback));
}

const WHOLE_NUMBER = 'must be a whole number in digits, without a unit (4194304, not 4MB)';

/**
 * A whole-number setting, whose refusal tells how to write one (`4MB`, `30s`, `2.5` and `0x10`
 * are not) and shows the text. Only for a value that is no whole number: the schema's own message
 * would also stand for every check chained after it (`positive`, `min`, `max`), whose refusals
 * say the range instead.
 */
export function wholeNumber() {
  const error = (issue: { input?: unknown }) => `${WHOLE_NUMBER}; this is ${JSON.stringify(issue.input)}`;
  return z.number({ error: (issue) => (issue.code === 'invalid_type' ? error(issue) : undefined) }).int({ error });
}

/**
 * A variable's text as a number when it is decimal digits (a minus sign allowed), as an operator
 * writes one: `0x10`, `1e3` or `1_000` stay text, which a number schema refuses. Unset and blank:
 * the default. `decimalNumber` is the same for a text read outside a schema (NaN when no digits).
 */
export function numberText(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  if (value.trim() === '') return undefined;
  const number = decimalNumber(value);
  return Number.isFinite(number) ? number : value;
}

/** `fraction`: a share or ratio, whose digits may have a decimal point (`0.8`, `2.`, `.5`). */
export function decimalNumber(text: string, fraction = false): number {
  const pattern = fraction ? /^-?(\d+\.?\d*|\.\d+)$/ : /^-?\d+$/;
  return pattern.test(text.trim()) ? Number(text) : Number.NaN;
}

export const booleanText = z
  .preprocess(
    // A number (a wrangler.toml `[vars]` integer on a Worker) is read as its digits.
    (value) => (typeof value === 'string' || typeof value === 'number' ? String(value).trim().toLowerCase() : value),
    z
      .union([z.boolean(), z.enum(['true', '1', 'yes', 'false', '0', 'no', ''])], {
        error: (issue) =>
          `must be true, 1 or yes (on), or false, 0 or no (off); this is ${JSON.stringify(issue.input)}`,
      })
      .optional(),
  )
  .transform((value) => value === true || value === 'true' || value === '1' || value === 'yes');

/** An http(s) URL (OTEL_EXPORTER_OTLP_ENDPOINT, S3_ENDPOINT); blank is unset. */
export function httpUrlText() {
  return optionalText().refine(
    (text) => text === undefined || (URL.canParse(text) && /^https?:$/.test(new URL(text).protocol)),
    'must be an http:// or https:// URL',
  );
}

/**
 * OTEL_EXPORTER_OTLP_HEADERS as OpenTelemetry writes it: `name=value,name2=value2`, values
 * percent-encoded (`Authorization=Basic%20abc`). Unset or blank: none.
 */
export function headerListText() {
  return secretText().transform((text, context) => {
    const headers: Record<string, string> = {};
    for (const [index, pair] of (text ?? '').split(',').entries()) {
      if (pair.trim() === '') continue;
      const equals = pair.indexOf('=');
      const name = pair.slice(0, Math.max(equals, 0)).trim();
      let value: string | undefined;
      try {
        value = decodeURIComponent(pair.slice(equals + 1).trim());
      } catch {
        value = undefined;
      }
      if (name === '' || value === undefined || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
        // Its text is not shown: a header value is often a credential, and this error may be answered.
        context.addIssue({ code: 'custom', message: `pair ${index + 1} (comma-separated) is not a name=value pair` });
        return z.NEVER;
      }
      headers[name] = value;
    }
    return headers;
  });
}

const BUDGET_EXAMPLE = 'JSON like {"max_cost_usd": 5, "max_turns": 100, "max_total_tokens": 2000000}';

/**
 * A session budget as JSON (DEFAULT_SESSION_BUDGET): the create field's shape (budgetSchema).
 * Unset, blank or `{}` (naming no limit, as a session's `budget: {}` is no limit): none. The
 * problem named says which key is wrong and why.
 */
export function budgetText() {
  return optionalText().transform((text, context): Budget | undefined => {
    if (text === undefined) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      context.addIssue({ code: 'custom', message: `must be ${BUDGET_EXAMPLE}; this is not JSON` });
      return z.NEVER;
    }
    const parsed = budgetSchema.safeParse(json);
    if (parsed.success) return Object.keys(parsed.data).length > 0 ? parsed.data : undefined;
    const problem = parsed.error.issues
      .map((issue) => (issue.path.length > 0 ? `${issue.path.join('.')}: ${issue.message}` : issue.message))
      .join('; ');
    context.addIssue({ code: 'custom', message: `must be ${BUDGET_EXAMPLE}; ${problem}` });
    return z.NEVER;
  });
}

/**
 * CORS_ORIGINS: the origins a browser page may call the API from, `*` for any, or a
 * comma-separated list of origins as a browser sends them (`https://app.example.com`, with a
 * port when not the scheme's own, no path nor trailing slash). Unset or blank: null (CORS off).
 */
export function corsOriginsText() {
  return optionalText().transform((text, context): '*' | string[] | null => {
    if (text === undefined) return null;
    const origins = text
      .split(',')
      .map((origin) => origin.trim())
      .filter((origin) => origin !== '');
    if (origins.length === 1 && origins[0] === '*') return '*';
    for (const origin of origins) {
      const problem =
        origin === '*'
          ? '"*" allows every origin and is set alone'
          : !URL.canParse(origin) || !/^https?:$/.test(new URL(origin).protocol)
            ? `"${origin}" is not an http:// or https:// origin`
            : new URL(origin).origin !== origin
              ? `"${origin}" is not an origin as a browser sends it: write ${new URL(origin).origin}`
              : null;
      if (problem !== null) {
        context.addIssue({ code: 'custom', message: `${problem} (CORS_ORIGINS is "*" or a comma-separated list)` });
        return z.NEVER;
      }
    }
    return origins;
  });
}
