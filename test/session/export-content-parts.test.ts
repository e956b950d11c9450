import { describe, expect, it } from 'vitest';
import { Inbox } from '../../lib/inbox/inbox.ts';
import type { Item } from '../../lib/items.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { importLines, type TransferServices } from '../../lib/transfer.ts';
import { exportText, headerLine, itemLine } from '../support/export-lines.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';
import { SessionLog } from '../support/session-log.ts';

const LOG_OPTIONS = { blobThreshold: 64, segmentTargetBytes: 512, packMinRecords: 2, keepRecords: 1 };
function world() {
  const store = new MemoryStore();
  const sessions = new SessionLog(store, LOG_OPTIONS);
  const inbox = new Inbox(store, { sessionExists: sessionExistsIn(store, '') });
  return { sessions, inbox, services: { sessions, inbox, env: {} } as TransferServices };
}
async function* chunks(text: string, size = 61) {
  const bytes = new TextEncoder().encode(text);
  for (let start = 0; start < bytes.length; start += size) yield bytes.slice(start, start + size);
}

describe('export/import round trip of content parts', () => {
  it('restores an image stored before images were checked whole as it was, which a request is refused', async () => {
    const cut = dataUrl('image/png', pngBytes(3, 2).slice(0, 40));
    const line = itemLine(1, { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: cut }] });
    const target = world();
    await importLines(target.services, chunks(`${headerLine('cut')}\n${line}\n`), {
      maxItemBytes: 1 << 20,
      maxNoticeBytes: 1024,
      maxLineBytes: 1 << 20,
    });
    expect(await exportText(target.services, 'cut')).toContain(cut);
    await expect(target.sessions.storeAttachments('cut', [JSON.parse(line)])).rejects.toThrow(/not a whole image\/png/);
  });

  it('gives the same bytes again', async () => {
    const source = world();
    await source.sessions.create({
      id: 'p1',
      instructions: 'x',
      tools: [
        {
          type: 'function',
          name: 'read',
          description: 'd',
          parameters: { type: 'object', properties: { b: {}, a: {} } },
        },
      ],
      metadata: { z: 1, a: { nested: ['é', null] } },
    });
    const image = dataUrl('image/png', pngBytes(3, 2));
    const items: Item[] = [
      {
        type: 'message',
        role: 'user',
        content: [
          { type: 'input_text', text: 'look' },
          { type: 'input_image', image_url: image, detail: 'low' },
        ],
      },
      { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png' }] },
      {
        type: 'message',
        role: 'user',
        content: [{ type: 'input_file', filename: 'r.pdf', file_data: dataUrl('application/pdf', pdfBytes()) }],
      },
      { type: 'message', role: 'user', content: [{ type: 'input_file', file_url: 'https://example.com/r.pdf' }] },
      { type: 'function_call', call_id: 'c1', name: 'read', arguments: '' },
      {
        type: 'function_call_output',
        call_id: 'c1',
        output: [
          { type: 'input_text', text: 'y'.repeat(300) },
          { type: 'input_image', image_url: image },
        ],
      },
      { type: 'function_call', call_id: 'c2', name: 'read', arguments: '{"b":1,"a":2}' },
      { type: 'function_call_output', call_id: 'c2', output: '' },
      { type: 'function_call', call_id: 'c3', name: 'read', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c3', output: 'z'.repeat(500) },
      { type: 'message', role: 'assistant', content: '' },
    ];
    for (const item of items) await source.sessions.append('p1', await source.sessions.storeAttachments('p1', [item]));
    await source.sessions.pack('p1');
    const exported = await exportText(source.services, 'p1');
    const target = world();
    await importLines(target.services, chunks(exported), {
      maxItemBytes: 1 << 20,
      maxNoticeBytes: 1024,
      maxLineBytes: 1 << 20,
    });
    expect(await exportText(target.services, 'p1')).toBe(exported);
  });
});
