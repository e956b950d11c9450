import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TOKEN } from './http-suite.ts';

// An import is read line by line (functions/routes/transfer.ts): the body checks that read a
// JSON body whole pass it by, whatever content type it claims.
describe('an import sent with a JSON content type', () => {
  it('is refused (400 naming content-type) without being read to its end', async () => {
    const environment = { API_TOKEN: TOKEN, MAX_BODY_BYTES: '1024' };
    const app = createApp({ store: () => new MemoryStore(), readEnvironment: () => environment, log: () => undefined });
    let sent = 0;
    // A client that keeps sending 64 KiB chunks, far past MAX_BODY_BYTES, up to 64 MiB.
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 64 * 1024 * 1024) return controller.close();
        sent += 65_536;
        controller.enqueue(new Uint8Array(65_536).fill(0x20));
      },
    });
    const response = await app.request('/v1/sessions/import', {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(400);
    expect(((await response.json()) as any).error.details).toMatchObject({ field: 'content-type' });
    expect(sent).toBeLessThan(1024 * 1024);
  });
});
