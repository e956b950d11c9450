import { InvalidRequestError, TailgateError } from './errors.ts';
import type { Inbox } from './inbox/index.ts';
import { exportHeaderSchema, parseExportLine, type ExportHeader } from './session/export-format.ts';
import type { ImportLine, SessionLog, SessionRecord } from './session/session-log.ts';
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
  const lines = ndjsonLines(body, options.maxLineBytes, options.checkValue);
  const first = await lines.next();
  if (first.done)
    throw new InvalidRequestError('line 1: the export is empty; it starts with its header', { field: 'line 1' });
  const parsed = parseExportLine(first.value.line, first.value.value, exportHeaderSchema);
  const { type: _type, format: _format, ...header } = options.checkHeader ? options.checkHeader(parsed) : parsed;
  return services.sessions.import({
    header,
    lines: { [Symbol.asyncIterator]: () => lines },
    maxItemBytes: options.maxItemBytes,
    maxNoticeBytes: options.maxNoticeBytes,
    pack: packOptions(sessionStrategyPlan(services.env, header)),
    afterCreate: (config, notices) => services.inbox.importDelivered(config.id, notices),
  });
}

const NEWLINE = 10;

/**
 * The JSON value of every non-blank line of `chunks` (UTF-8, `\n` or `\r\n`), numbered from 1.
 * A line that is not UTF-8 or not JSON is a 400, one longer than `maxLineBytes` a 413, naming it.
 */
export async function* ndjsonLines(
  chunks: AsyncIterable<Uint8Array>,
  maxLineBytes: number,
  checkValue?: (value: unknown, field: string) => void,
): AsyncGenerator<ImportLine> {
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
    line += 1;
    let bytes = parts.length === 1 ? parts[0]! : concat(parts);
    if (bytes[bytes.length - 1] === 13) bytes = bytes.subarray(0, bytes.length - 1);
    let text: string;
    try {
      text = decoder.decode(bytes);
    } catch {
      throw new InvalidRequestError(`line ${line}: not UTF-8`, { field: `line ${line}` });
    }
    if (text.trim() === '') return null;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new InvalidRequestError(`line ${line}: not JSON (${(error as Error).message})`, { field: `line ${line}` });
    }
    checkValue?.(value, `line ${line}`);
    return { line, value, bytes: bytes.length };
  };
  for await (const chunk of chunks) {
    let start = 0;
    for (let end = chunk.indexOf(NEWLINE); end >= 0; end = chunk.indexOf(NEWLINE, start)) {
      if (heldBytes + end - start > maxLineBytes) throw tooLong();
      const parsed = parse([...held, chunk.subarray(start, end)]);
      held = [];
      heldBytes = 0;
      start = end + 1;
      if (parsed) yield parsed;
    }
    if (start < chunk.length) {
      held.push(chunk.subarray(start));
      heldBytes += chunk.length - start;
      if (heldBytes > maxLineBytes) throw tooLong();
    }
  }
  if (heldBytes > 0) {
    const parsed = parse(held);
    if (parsed) yield parsed;
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const bytes = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}
