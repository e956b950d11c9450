import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { BackgroundTurn } from '../../lib/turn/index.ts';
import { appHarness } from '../support/app-harness.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A delete of the newest turn is refused while that turn is open, as one that passes once the
// turn ended (`details.running`). A background turn no runner took yet is queued, not running:
// the refusal says so.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };

it('refuses the delete of a queued background turn as queued', async () => {
  // Its background turns are kept, not run: the turn stays queued.
  const sent: BackgroundTurn[] = [];
  const api = createClient(
    appHarness(new MemoryStore(), environment, { queueTurn: () => async (run) => void sent.push(run) }),
  );
  const id = await api.session();
  const posted = await api.post(`/v1/sessions/${id}/turns`, { input: 'later', background: true });
  expect(posted.status).toBe(202);
  expect(sent).toHaveLength(1);
  expect((await api.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('queued');
  const deleted = await api.delete(`/v1/sessions/${id}/turns/1`);
  expect(deleted.status).toBe(409);
  expect(deleted.body.error).toMatchObject({ code: 'delete_refused', details: { id, turn: 1, running: true } });
  expect(deleted.body.error.message).toBe(`turn 1 of session ${id} is queued; delete it once it has ended`);
});
