import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';

// A chat completion under x-tailgate-session gives the notices it consumed back when no model
// answered them: to the incarnation it read, as a closed turn gives them back, so a session
// deleted and created again under its id meanwhile does not get them.
const TOKEN = 'chat-give-back-token';

/** A store that runs `between` once a delivery record of session `s` is deleted, given back. */
class GivingBackStore extends MemoryStore {
  between: (() => Promise<void>) | undefined;

  override async delete(keys: string | string[]) {
    await super.delete(keys);
    const between = this.between;
    if (between && typeof keys === 'string' && keys.startsWith('sessions/s/inbox_removed/')) {
      this.between = undefined;
      await between();
    }
  }
}

describe('a chat completion whose model call fails gives its notices back', () => {
  it('to the session it read, not to one created again under its id meanwhile', async () => {
    // Every reading of the clock a millisecond later: the session created again has a creation time of its own.
    let now = Date.now();
    const clock = () => new Date(++now);
    const store = new GivingBackStore({ clock });
    const provider = await startFakeProvider(() => ({ status: 400, json: { error: { message: 'refused' } } }));
    const app = createApp({
      store: () => store,
      clock,
      readEnvironment: () => ({
        API_TOKEN: TOKEN,
        DEFAULT_MODEL: 'echo',
        OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
        MODEL_ALIASES: 'down=openai-compatible:fake',
        MODEL_MAX_RETRIES: '0',
      }),
      log: () => {},
    });
    const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      app.request(`http://tailgate.test/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    try {
      expect((await call('POST', '/sessions', { id: 's' })).status).toBe(201);
      expect((await call('POST', '/sessions/s/inbox', { name: 'note', content: 'for the first' })).status).toBe(201);
      // Once the call failed, its notice is posted back and its record deleted; then the id is
      // deleted and created again, before the give-back checks the incarnation.
      store.between = async () => {
        expect((await call('DELETE', '/sessions/s')).status).toBe(204);
        expect((await call('POST', '/sessions', { id: 's' })).status).toBe(201);
      };
      const failed = await call(
        'POST',
        '/chat/completions',
        { model: 'down', messages: [{ role: 'user', content: 'hi' }] },
        { 'x-tailgate-session': 's' },
      );
      expect(failed.status).toBe(502);
      expect(store.between).toBeUndefined();
      const turn = (await (await call('POST', '/sessions/s/turns', { input: 'next' })).json()) as {
        context: { notices_delivered: string[] };
      };
      expect(turn.context.notices_delivered).toEqual([]);
      expect(((await (await call('GET', '/sessions/s/inbox')).json()) as { pending: unknown[] }).pending).toEqual([]);
    } finally {
      await provider.close();
    }
  });
});
