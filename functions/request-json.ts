import type { MiddlewareHandler } from 'hono';
import { InvalidRequestError } from '../lib/errors.ts';
import { bracketSegments, pathDetails } from '../lib/field-path.ts';
import { textProblem } from '../lib/items.ts';

/** Deepest nesting of arrays and objects a request body may have (the body itself is level 1). */
export const MAX_JSON_DEPTH = 64;

/** `application/json` and `application/<anything>+json`, with or without parameters. */
export const JSON_CONTENT_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i;

interface PathSegment {
  parent: PathSegment | undefined;
  key: string | number;
}

/**
 * Checks parsed JSON before any schema sees it, in one iterative walk (no recursion, so no
 * nesting can overflow the stack): nesting at most MAX_JSON_DEPTH levels, every string,
 * key or value, free of NUL and lone surrogates, and no key `__proto__` outside a JSON Schema
 * (`inJsonSchema`). Throws `invalid_request` naming the field (`body.metadata.note`) and, for
 * depth, the limit. Every runtime answers the same 400, where deep JSON would otherwise fail
 * later (a 500 on Node) or be stored (Deno, workerd).
 *
 * @example checkJsonValue(JSON.parse('{"a":"x\\u0000"}'), 'body') // throws: body.a: contains NUL (U+0000)
 */
export function checkJsonValue(value: unknown, base: string): void {
  const stack: { value: unknown; depth: number; path: PathSegment | undefined }[] = [
    { value, depth: 1, path: undefined },
  ];
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    const { value: current, depth, path } = frame;
    if (typeof current === 'string') {
      refuseBadText(current, base, path);
      continue;
    }
    if (typeof current !== 'object' || current === null) continue;
    if (depth > MAX_JSON_DEPTH) {
      const [field, bracketed] = fieldName(base, path);
      throw new InvalidRequestError(
        `${field}: JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
        pathDetails({ field, limit: MAX_JSON_DEPTH }, bracketed),
      );
    }
    if (Array.isArray(current)) {
      for (let index = current.length - 1; index >= 0; index--)
        stack.push({ value: current[index], depth: depth + 1, path: { parent: path, key: index } });
      continue;
    }
    const entries = Object.entries(current);
    for (let index = entries.length - 1; index >= 0; index--) {
      const [key, child] = entries[index]!;
      const childPath = { parent: path, key };
      refuseBadText(key, base, childPath, 'key');
      if (key === '__proto__' && !inJsonSchema(path)) refuseKey(base, childPath);
      stack.push({ value: child, depth: depth + 1, path: childPath });
    }
  }
}

/**
 * Whether an object at `path` lies below the top level of a value under a key `parameters` or `schema`
 * (a tool's parameters, a response format's schema, whose keys are kept as sent: a property named
 * `__proto__`); wherever else such a key is, what is below it is read as parsed, so nothing is dropped.
 */
function inJsonSchema(path: PathSegment | undefined): boolean {
  for (let segment = path?.parent; segment !== undefined; segment = segment.parent) {
    if (segment.key === 'parameters' || segment.key === 'schema') return true;
  }
  return false;
}

/**
 * A key `__proto__` (an own key of the parsed JSON) is refused, but inside a JSON Schema (`inJsonSchema`):
 * a schema copying keys into a new object would set its prototype instead and drop the key unseen, a 200
 * for what is 400 by another name.
 */
function refuseKey(base: string, path: PathSegment): never {
  const [field, bracketed] = fieldName(base, path);
  throw new InvalidRequestError(`${field}: the key __proto__ is not taken`, pathDetails({ field }, bracketed));
}

function refuseBadText(text: string, base: string, path: PathSegment | undefined, what = 'value'): void {
  const problem = textProblem(text);
  if (problem === undefined) return;
  const [field, bracketed] = fieldName(base, path);
  throw new InvalidRequestError(
    `${field}: ${what === 'key' ? 'the key ' : ''}${problem}`,
    pathDetails({ field }, bracketed),
  );
}

/**
 * `body.input.0.content`, and as a message writes it, `body.input[0].content` (lib/field-path.ts:
 * a key of digits stays a key); a key that is not clean text is shown escaped.
 */
function fieldName(base: string, path: PathSegment | undefined): [field: string, bracketed: string] {
  const keys: (string | number)[] = [];
  for (let segment = path; segment !== undefined; segment = segment.parent) {
    const key = segment.key;
    keys.push(typeof key === 'number' || textProblem(key) === undefined ? key : JSON.stringify(key));
  }
  const segments = [base, ...keys.reverse()];
  return [segments.join('.'), bracketSegments(segments)];
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Every JSON request body passes `checkJsonValue` before its route's validator: one that is not
 * UTF-8 is a 400 (decoded leniently, its bad bytes would be stored as U+FFFD), and so is one that
 * does not parse, naming `body` with the parser's reason; one that does is what
 * `c.req.json()` answers from then on. An empty one (or only whitespace) is no body, as without
 * a JSON content type: the validator reads `{}`, so a route whose fields are optional takes its
 * defaults (a compaction, a conversation) and another names the field it misses, where the
 * validator would answer "Malformed JSON".
 */
export const checkJsonBody: MiddlewareHandler = async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.req.method === 'DELETE') return next();
  if (!JSON_CONTENT_TYPE.test(c.req.header('content-type') ?? '')) return next();
  let text: string;
  try {
    text = strictUtf8.decode(await c.req.arrayBuffer());
  } catch {
    throw new InvalidRequestError('body: not UTF-8', { field: 'body' });
  }
  if (/^[ \t\r\n]*$/.test(text)) {
    // Hono keeps each read of the body as a promise (typed as its value): json() parses the text's.
    (c.req.bodyCache as unknown as { text?: Promise<string> }).text = Promise.resolve('{}');
    return next();
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    // The parser's reason says where it stopped (`Unexpected end of JSON input`, `... at position 14`).
    if (error instanceof SyntaxError)
      throw new InvalidRequestError(`body: not JSON (${error.message})`, { field: 'body' });
    throw error;
  }
  checkJsonValue(parsed, 'body');
  // The validator (and the rate limiter, for a turn) read this parse: the body is decoded and
  // parsed once, not again from its bytes. Nothing changes a parsed body (schemas build new values).
  const json = Promise.resolve(parsed);
  c.req.json = <T>() => json as Promise<T>;
  return next();
};
