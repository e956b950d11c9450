/**
 * How a message names a request's field: an array position in brackets, as OpenAI's `param`
 * does (`input[0].call_id`), where `details.field` is dotted (`input.0.call_id`, docs/API.md,
 * "Conventions").
 */

/** `input.0.content.1` -> `input[0].content[1]`. */
export function bracketPath(field: string): string {
  return field.replaceAll(/\.(\d+)(?=\.|$)/g, '[$1]');
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
  const bracketed = bracketPath(field);
  if (bracketed === field) return message;
  const location = LOCATIONS.find((prefix) => message.startsWith(`${prefix}${field}: `));
  return location === undefined ? message : `${location}${bracketed}${message.slice(location.length + field.length)}`;
}
