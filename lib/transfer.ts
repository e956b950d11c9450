import { InvalidRequestError, TailgateError } from './errors.ts';
import { bracketedField, pathDetails } from './field-path.ts';
import { sha256Parts } from './hash.ts';
import type { Inbox } from './inbox/index.ts';
import { exportHeaderSchema, parseExportLine, type ExportHeader } from './session/export-format.ts';
import type { ImportLine, SessionLog, SessionRecord } from './session/session-log.ts';
import { concatBytes } from './store/object-store.ts';
import { packOptions, sessionStrategyPlan } from './turn/plan.ts';

/**
 * A session's export and import as whole streams (lib/session/export-format.ts): the session
 * log's lines with the inbox's delivered-notice records, and JSON Lines bytes read one line at
 * a time, each at most `maxLineBytes`, so neither side holds more than a segment and a line.
 */

export interface TransferServices {
  sessions: Pick<SessionLog, 'export' | 'import'>;
  inbox: Pick<Inbox, 'exportDelivered' | 'importDelivered'>;
  env: Record<string, string | undefined>;
}

/** Every line of the export of session `id`; a missing session: NotFoundError before the first. */
export async function exportLines(services: TransferServices, id: string): Promise<AsyncGenerator<string>> {
  const { lines } = await services.sessions.export(id);
  return (async function* () {
    yield* lines;
    yield* services.inbox.exportDelivered(id);
  })();
}

export interface ImportStreamOptions {
  maxItemBytes: number;
  maxNoticeBytes: number;
  /** A longer line is refused (413) before it is held whole. */
  maxLineBytes: number;
  /** Checks a parsed line before its schema does (`field`: `line <n>`). */
  checkValue?: (value: unknown, field: string) => void;
  /** Checks and normalizes the header's config, as a create does. */
  checkHeader?: (header: ExportHeader) => ExportHeader;
}

/** Creates a session from the bytes of an export (see SessionLog.import). */
export async function importLines(
  services: TransferServices,
  body: AsyncIterable<Uint8Array>,
  options: ImportStreamOptions,
): Promise<SessionRecord> {
  const batches = ndjsonLines(body, options.maxLineBytes, options.checkValue);
  const first = await batches.next();
  if (first.done)
    throw new InvalidRequestError('line 1: the export is empty; it starts with its header', { field: 'line 1' });
  const [headerLine, ...rest] = first.value;
  const parsed = parseExportLine(headerLine!.line, headerLine!.value, exportHeaderSchema);
  const {
    type: _type,
    format: _format,
    ...header
  } = options.checkHeader ? checkHeaderLine(options.checkHeader, parsed, headerLine!.line) : parsed;
  // The export's SHA-256 is of its lines, each with one line end: sent again with other line
  // ends, blank lines or chunks, it is the same export (a retry finishes it, log/import-pending.ts).
  const digest = sha256Parts();
  const hashed = (batch: ImportLine[]) => {
    for (const { raw } of batch) {
      digest.update(raw);
      digest.update(LINE_END);
    }
    return batch;
  };
  hashed(first.value);
  const lines = (async function* () {
    if (rest.length > 0) yield rest;
    for await (const batch of batches) yield hashed(batch);
  })();
  return services.sessions.import({
    header,
    lines,
    exportSha256: async () => {
      for await (const batch of lines) void batch;
      return digest.hex();
    },
    maxItemBytes: options.maxItemBytes,
    maxNoticeBytes: options.maxNoticeBytes,
    pack: packOptions(sessionStrategyPlan(services.env, header)),
    afterCreate: (config, notices) => services.inbox.importDelivered(config.id, notices, config.generation),
  });
}

/**
 * The header's config checked as a create checks it; a refusal naming a field names it as every
 * line's does, its message starting with it (`line <n>.webhook_url: ...`, positions in brackets),
 * not as the create's body would (`webhook_url`).
 */
function checkHeaderLine(
  check: (header: ExportHeader) => ExportHeader,
  header: ExportHeader,
  line: number,
): ExportHeader {
  try {
    return check(header);
  } catch (error) {
    const details = error instanceof TailgateError ? (error.details as { field?: unknown } | undefined) : undefined;
    if (typeof details?.field !== 'string') throw error;
    const inner = bracketedField(details) ?? details.field;
    const field = `line ${line}.${details.field}`;
    const bracketed = `line ${line}.${inner}`;
    const message = (error as Error).message;
    // The field the message starts with (`body.metadata is ...`, `strategy_config.0: ...`) is the line's.
    const named = ['', 'body.']
      .flatMap((location) => [`${location}${details.field}`, `${location}${inner}`])
      .find((start) => message.startsWith(`${start}: `) || message.startsWith(`${start} `));
    const rest = named === undefined ? `: ${message}` : message.slice(named.length);
    throw new TailgateError(
      (error as TailgateError).code,
      `${bracketed}${rest}`,
      pathDetails({ ...details, field }, bracketed),
    );
  }
}

const NEWLINE = 10;
const LINE_END = new Uint8Array([NEWLINE]);

/**
 * The JSON value of every non-blank line of `chunks` (UTF-8, `\n` or `\r\n`), numbered from 1,
 * in batches: the lines that end in a chunk, none empty. A line that is not UTF-8 or not JSON is
 * a 400, one longer than `maxLineBytes` a 413, naming it, thrown after the lines before it.
 * A line's `raw` is a view of the chunk it came in (as a stream's reader hands chunks over, they
 * are not written to once yielded), or of a copy when it spans chunks.
 */
export async function* ndjsonLines(
  chunks: AsyncIterable<Uint8Array>,
  maxLineBytes: number,
  checkValue?: (value: unknown, field: string) => void,
): AsyncGenerator<ImportLine[]> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });
  let held: Uint8Array[] = [];
  let heldBytes = 0;
  let line = 0;
  const tooLong = () =>
    new TailgateError('payload_too_large', `line ${line + 1} is longer than ${maxLineBytes} bytes`, {
      line: line + 1,
      limit: maxLineBytes,
    });
  const parse = (parts: Uint8Array[]): ImportLine | null => {
    const bytes = parts.length === 1 ? parts[0]! : concatBytes(parts);
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      throw new InvalidRequestError(`line ${line + 1}: not UTF-8`, { field: `line ${line + 1}` });
    }
    return parseText(text, bytes);
  };
  /** `text` is `raw` decoded (a leading byte order mark dropped, as the decoder drops it). */
  const parseText = (text: string, raw: Uint8Array): ImportLine | null => {
    if (raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf) raw = raw.subarray(3);
    line += 1;
    const carriageReturn = text.endsWith('\r');
    const body = carriageReturn ? text.slice(0, -1) : text;
    if (body.trim() === '') return null;
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch (error) {
      throw new InvalidRequestError(`line ${line}: not JSON (${(error as Error).message})`, { field: `line ${line}` });
    }
    checkValue?.(value, `line ${line}`);
    return { line, value, raw: carriageReturn ? raw.subarray(0, raw.length - 1) : raw };
  };
  /** Whole lines (`region` holds no line's end but between them): decoded at once when all ASCII, else one by one. */
  /** The lines that end in `chunk`, after those `held` from the chunks before. */
  const readChunk = (chunk: Uint8Array, batch: ImportLine[]) => {
    let start = 0;
    const first = chunk.indexOf(NEWLINE);
    if (first >= 0 && held.length > 0) {
      if (heldBytes + first > maxLineBytes) throw tooLong();
      const parsed = parse([...held, chunk.subarray(0, first)]);
      held = [];
      heldBytes = 0;
      start = first + 1;
      if (parsed) batch.push(parsed);
    }
    const last = chunk.lastIndexOf(NEWLINE);
    if (last >= start) {
      lines(chunk.subarray(start, last), batch);
      start = last + 1;
    }
    if (start < chunk.length) {
      held.push(chunk.subarray(start));
      heldBytes += chunk.length - start;
      if (heldBytes > maxLineBytes) throw tooLong();
    }
  };
  const lines = (region: Uint8Array, batch: ImportLine[]) => {
    let text: string | null = null;
    try {
      text = decoder.decode(region);
    } catch {
      // Found again below, with its line number.
    }
    if (text !== null && text.length === region.length) {
      // One UTF-16 unit a byte: each line's length is its bytes.
      let start = 0;
      for (const part of text.split('\n')) {
        if (part.length > maxLineBytes) throw tooLong();
        const parsed = parseText(part, region.subarray(start, start + part.length));
        start += part.length + 1;
        if (parsed) batch.push(parsed);
      }
      return;
    }
    let start = 0;
    for (let end = region.indexOf(NEWLINE); ; end = region.indexOf(NEWLINE, start)) {
      const stop = end < 0 ? region.length : end;
      if (stop - start > maxLineBytes) throw tooLong();
      const parsed = parse([region.subarray(start, stop)]);
      if (parsed) batch.push(parsed);
      if (end < 0) return;
      start = end + 1;
    }
  };
  for await (const chunk of chunks) {
    const batch: ImportLine[] = [];
    try {
      readChunk(chunk, batch);
    } catch (error) {
      // The lines before the one at fault go first: a refusal names the first line at fault.
      if (batch.length > 0) yield batch;
      throw error;
    }
    if (batch.length > 0) yield batch;
  }
  if (heldBytes > 0) {
    const parsed = parse(held);
    if (parsed) yield [parsed];
  }
}
