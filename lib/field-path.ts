/**
 * How a message names a request's field: an array position in brackets, as OpenAI's `param`
 * does (`input[0].call_id`), where `details.field` is dotted (`input.0.call_id`, docs/API.md,
 * "Conventions").
 */

/** `input.0.content.1` -> `input[0].content[1]`: every segment of digits read as an array position. */
export function bracketPath(field: string): string {
  return field.replaceAll(/\.(\d+)(?=\.|$)/g, '[$1]');
}

/** A schema's issue as `details.issues` holds it (functions/error-handler.ts validationError). */
interface Issue {
  code?: unknown;
  path?: unknown;
  keys?: unknown;
}

/** The path an issue names: an unknown field's key after the object's path. */
function issuePath(issue: Issue): (string | number)[] | undefined {
  if (!Array.isArray(issue.path)) return undefined;
  const path = issue.path.filter((segment) => typeof segment === 'string' || typeof segment === 'number');
  if (path.length !== issue.path.length) return undefined;
  if (issue.code !== 'unrecognized_keys') return path;
  const key = Array.isArray(issue.keys) ? issue.keys[0] : undefined;
  return typeof key === 'string' ? [...path, key] : undefined;
}

/** The bracketed field of details whose check knew its path (`pathDetails`). */
const KNOWN = new WeakMap<object, string>();

/** `["input", 0, "content"]` -> `input[0].content`: a number a position, a string a key. */
export function bracketSegments(path: readonly (string | number)[]): string {
  return path
    .map((segment, at) => (typeof segment === 'number' ? `[${segment}]` : at === 0 ? segment : `.${segment}`))
    .join('');
}

/**
 * `details` of a refusal whose check knows the path of its dotted `field`: `bracketed` the
 * field with its positions in brackets (bracketSegments), as its message then writes it.
 */
export function pathDetails<Details extends { field: string }>(details: Details, bracketed: string): Details {
  KNOWN.set(details, bracketed);
  return details;
}

/**
 * `details.field` with its array positions in brackets. A check that knew its path said which
 * segments are positions (pathDetails), and so does a schema's refusal (its issue's path has
 * numbers for positions), so a metadata key `"0"` stays `metadata.0`; any other check's field
 * names no key of digits, and each is a position.
 */
export function bracketedField(details: unknown): string | undefined {
  const { field, issues } = (details ?? {}) as { field?: unknown; issues?: unknown };
  if (typeof field !== 'string') return undefined;
  const known = details && typeof details === 'object' ? KNOWN.get(details) : undefined;
  if (known !== undefined) return known;
  if (Array.isArray(issues))
    for (const issue of issues as Issue[]) {
      const path = issue && typeof issue === 'object' ? issuePath(issue) : undefined;
      if (path === undefined || path.map(String).join('.') !== field || path.length === 0) continue;
      return bracketSegments(path);
    }
  return bracketPath(field);
}

/** Where a message names its field: the body's or query's schema puts `body.` or `query.` before it. */
const LOCATIONS = ['', 'body.', 'query.', 'param.'];

/**
 * `message` with the path of `details.field` it starts with written in brackets
 * (`body.input.0.role: ...` -> `body.input[0].role: ...`), whichever check wrote it; any other
 * message as it is.
 */
export function bracketedMessage(message: string, details: unknown): string {
  const field = (details as { field?: unknown } | undefined)?.field;
  if (typeof field !== 'string') return message;
  const bracketed = bracketedField(details) ?? field;
  if (bracketed === field) return message;
  const location = LOCATIONS.find((prefix) => message.startsWith(`${prefix}${field}: `));
  return location === undefined ? message : `${location}${bracketed}${message.slice(location.length + field.length)}`;
}

/**
 * `details` of a refusal answered before (`message` as clientError wrote it, kept as JSON: a turn's
 * stored failure), its field's path as that message starts with it: a message that starts with the
 * field in brackets (`body.metadata.0[0]: ...` for `body.metadata.0.0`) says which of its segments
 * of digits are keys; any other, nothing more than `details` says.
 */
export function answeredDetails(details: unknown, message: string): unknown {
  const field = (details as { field?: unknown } | undefined)?.field;
  if (typeof field !== 'string' || !details || typeof details !== 'object') return details;
  for (const location of LOCATIONS) {
    if (!message.startsWith(location)) continue;
    const end = message.indexOf(': ', location.length);
    const written = end < 0 ? undefined : message.slice(location.length, end);
    if (written !== undefined && written.replaceAll(/\[(\d+)\]/g, '.$1') === field) {
      KNOWN.set(details, written);
      break;
    }
  }
  return details;
}
