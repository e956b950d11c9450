import { exportLines, type TransferServices } from '../../lib/transfer.ts';

/** Lines of a session export (lib/session/export-format.ts) for import tests. */

const AT = '2026-01-01T00:00:00.000Z';

/** The header line of an empty session config with id `id`. */
export function headerLine(id: string): string {
  return JSON.stringify({
    type: 'session',
    format: 'tailgate.export.v1',
    id,
    created_at: AT,
    instructions: null,
    model: null,
    strategies: null,
    strategy_config: {},
    tools: [],
    metadata: {},
  });
}

/** An item line: `fields` with seq `seq`. */
export function itemLine(seq: number, fields: Record<string, unknown>): string {
  return JSON.stringify({ ...fields, seq, created_at: AT });
}

/** A user message line with seq `seq`. */
export function messageLine(seq: number): string {
  return itemLine(seq, { type: 'message', role: 'user', content: `m${seq}` });
}

/** The export of session `id`, every line of it. */
export async function exportText(services: TransferServices, id: string): Promise<string> {
  let text = '';
  for await (const lines of await exportLines(services, id)) text += lines;
  return text;
}

/** The bytes of `text` in one chunk, for an import. */
export async function* inOneChunk(text: string): AsyncGenerator<Uint8Array> {
  yield new TextEncoder().encode(text);
}

/** The line of a notice delivered to turn 1, stored as `note`. */
export const NOTICE = JSON.stringify({
  type: 'notice',
  stored_as: 'note',
  name: 'note',
  posted_at: '2026-01-01T00:00:01.000Z',
  delivered_at: '2026-01-01T00:00:02.000Z',
  turn: 1,
  content: 'imported note',
});
