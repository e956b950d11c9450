/**
 * A thrown value as a failure's log line shows it, the same on every runtime: an Error as the
 * text `Name: message`, its stack's frames, its own fields (a TailgateError's `code` and
 * `details`) as JSON and its cause, each error named by its `name` (the classes of lib/ and
 * functions/ set it). The runtimes' own display of an error names its class, which the Worker's
 * bundle does not keep (wrangler.toml, `keep_names`): `Ao [ModelError]: …`. A plain object
 * holding errors (`{key, error}`, as the app logs an inbox warning) is copied with each of them so
 * shown; anything else is returned as it is. A field whose getter throws is shown as
 * `[getter threw]`, the others as they are: the line is still written.
 *
 * @example loggable(new StorageError('R2 get k failed')) // 'StorageError: R2 get k failed\n    at …\n{"code":…}'
 */
export function loggable(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error)) return depth === 0 ? withLoggableFields(error) : error;
  const [name, message, stack, cause] = SHOWN_APART.map((key) => read(error, key));
  const fields = Object.fromEntries(
    Object.keys(error)
      .filter((key) => !SHOWN_APART.includes(key))
      .map((key) => [key, read(error, key)]),
  );
  const head = `${String(name ?? 'Error')}${message ? `: ${message}` : ''}`;
  const lines = [
    head,
    ...String(stack ?? '')
      .split('\n')
      .filter((line) => /^\s+at /.test(line)),
  ];
  if (Object.keys(fields).length > 0) lines.push(json(fields));
  if (cause !== undefined) lines.push(`[cause]: ${depth < 4 ? causeText(cause, depth + 1) : '…'}`);
  return lines.join('\n');
}

/** An error's properties its line shows apart from its other fields. */
const SHOWN_APART = ['name', 'message', 'stack', 'cause'];

/**
 * A field's value to depth 2, deeper objects `[Object]` and arrays `[Array]`, text cut at 200
 * characters, of an array or object its first 100 entries and a count of the rest, an error as
 * its name, message and fields: as far as the runtimes' own display goes (a provider SDK's error
 * carries its request, the prompt, which a log line does not copy).
 */
function clipped(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return clippedText(value);
  if (typeof value !== 'object' || value === null) return value;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString();
  if (depth > 2) return Array.isArray(value) ? '[Array]' : '[Object]';
  if (Array.isArray(value)) {
    const shown = value.slice(0, MAX_ENTRIES).map((entry) => clipped(entry, depth + 1));
    return value.length > MAX_ENTRIES ? [...shown, `… ${value.length - MAX_ENTRIES} more`] : shown;
  }
  const keys = [...new Set([...(value instanceof Error ? ['name', 'message'] : []), ...Object.keys(value)])];
  const shown = keys.slice(0, MAX_ENTRIES).map((key) => [key, clipped(read(value, key), depth + 1)]);
  if (keys.length > MAX_ENTRIES) shown.push(['…', `${keys.length - MAX_ENTRIES} more`]);
  return Object.fromEntries(shown);
}

/** The entries of an array or object a log line shows (the runtimes' display shows 100 of an array). */
const MAX_ENTRIES = 100;

/** Text cut at 200 characters. */
function clippedText(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** `value[key]`, or `[getter threw]` when reading it throws. */
function read(value: object, key: string): unknown {
  try {
    return (value as Record<string, unknown>)[key];
  } catch {
    return '[getter threw]';
  }
}

/** A cause: an Error as `loggable` shows it, an object as its fields (`json`), anything else as text (cut). */
function causeText(cause: unknown, depth: number): string {
  if (cause instanceof Error) return String(loggable(cause, depth));
  return typeof cause === 'object' && cause !== null
    ? json(cause as Record<string, unknown>)
    : clippedText(String(cause));
}

/** Fields as one line of JSON (`clipped`), at most 4 KiB; ones that do not serialize are named. */
function json(fields: Record<string, unknown>): string {
  try {
    const text = JSON.stringify(clipped(fields, 0));
    return text.length > 4096 ? `${text.slice(0, 4096)}…` : text;
  } catch {
    return `{${Object.keys(fields).join(', ')}}`;
  }
}

/** `value`, a plain object, with each of its own fields that is an Error `loggable`; else `value` itself. */
function withLoggableFields(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Object.getPrototypeOf(value) !== Object.prototype) return value;
  const entries = Object.keys(value).map((key) => [key, read(value, key)] as const);
  if (!entries.some(([, field]) => field instanceof Error)) return value;
  return Object.fromEntries(entries.map(([key, field]) => [key, field instanceof Error ? loggable(field, 1) : field]));
}

/**
 * A failure's line on the console when no log is given: a message alone is one line (no
 * "undefined" after it); details after it are `loggable`.
 */
export function logToConsole(message: string, details?: unknown): void {
  if (details === undefined) console.error(message);
  else console.error(message, loggable(details));
}
