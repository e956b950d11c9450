import { expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { SessionLog } from '../support/session-log.ts';
import { heldOptions, releasedAfterEach } from '../support/slow-echo.ts';
import { createClient, TOKEN } from './http-suite.ts';

// A turn cancelled by another process, whose completion a pack moved into a segment before the
// turn's owner ended: the owner's own completion is refused as the cancel closed it (409
// `turn_cancelled`, lib/session/log/packed-turn.ts), not as a lapsed lease's close.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '600000' };
const heldEcho = releasedAfterEach();

it("a turn cancelled, packed before its owner ends, answers its owner's request 409 turn_cancelled", async () => {
  const store = new MemoryStore();
  const slow = heldEcho();
  const { options, drain } = heldOptions(slow.model);
  const owner = createClient(appHarness(store, environment, options));
  const other = createClient(appHarness(store, environment, heldOptions(heldEcho().model).options));
  const id = await owner.session();
  const pending = owner.post(`/v1/sessions/${id}/turns`, { input: 'slow one' });
  await slow.reached;
  await expect.poll(async () => (await other.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('in_progress');
  expect((await other.post(`/v1/sessions/${id}/turns/1/cancel`)).status).toBe(200);
  expect((await other.post(`/v1/sessions/${id}/turns`, { input: 'next' })).status).toBe(200);
  const packed = await new SessionLog(store, { keepRecords: 1, packMinRecords: 1 }).pack(id);
  expect(packed.through).toBeGreaterThanOrEqual(1);
  slow.release();
  const answered = await pending;
  expect(answered.status, JSON.stringify(answered.body)).toBe(409);
  expect(answered.body.error).toMatchObject({ code: 'turn_cancelled' });
  expect((await owner.get(`/v1/sessions/${id}/turns/1`)).body.status).toBe('cancelled');
  await drain();
});
