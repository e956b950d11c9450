import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A notice set aside as unreadable is one error line naming its key; an `error` is named
// beside it only when there is one (a failed delete of the original), not as `error: undefined`.

describe('the log line of a notice set aside', () => {
  it('names the key, and no error when there was none', async () => {
    const logged: [string, unknown][] = [];
    const store = new MemoryStore();
    const api = createClient(
      appHarness(
        store,
        { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' },
        { log: (message, details) => void logged.push([message, details]) },
      ),
    );
    const id = await api.session();
    await store.put(`sessions/${id}/inbox/0001-bin.md`, new Uint8Array([0xff, 0xfe, 0x00, 0x41]));
    const turn = await api.post(`/v1/sessions/${id}/turns`, { input: 'hi' });
    expect(turn.status).toBe(200);
    const requestId = turn.headers.get('x-request-id');
    const lines = logged.filter(([message]) => message.startsWith('tailgate inbox:'));
    // Logged during the request: the line names its x-request-id.
    expect(lines).toStrictEqual([
      [
        `tailgate inbox: notice set aside as inbox_unreadable/0001-bin.md: content is not valid UTF-8 (${requestId})`,
        { key: `sessions/${id}/inbox/0001-bin.md` },
      ],
    ]);
  });
});
