import { expect, it } from 'vitest';
import { takeOutDead } from '../../lib/turn/dead-turn.ts';
import { deadSecondStep, HOUR, noBodyHeldAfterEach, processOf, texts } from '../support/dead-process.ts';
import { inbox, SessionLog } from '../support/session-log.ts';

// Two take-outs of one dead turn race: one that closes it starts a pickup (the session log's
// onLeaseClosed), whose claim, refused, takes it out too. The one that finds it gone by then
// took nothing out, and logs nothing: the turn does not stay.

noBodyHeldAfterEach();

it('a take-out of a dead turn that another took out first logs no failure', async () => {
  const { store, id } = await deadSecondStep();
  // A reader of its events closes it once its lease ran out.
  const later = processOf(store, 2 * HOUR);
  await later.native('GET', `/v1/sessions/${id}/turns/2/events`);
  await later.drain();
  const tasks: Promise<unknown>[] = [];
  const logged: string[] = [];
  const services = {
    env: {},
    background: (task: Promise<unknown>) => void tasks.push(task),
    log: (message: string) => void logged.push(message),
    inbox,
    sessions: new SessionLog(store, { clock: () => new Date(Date.now() + 2 * HOUR) }),
  };
  // Read by the loser before the winner took the turn out.
  const read = await services.sessions.getWithNewestTurn(id);
  expect(read.newestTurn).toMatchObject({ turn: 2, status: 'failed', answered_at_end: true });
  expect(await takeOutDead(services, id)).toBe(true);
  expect(await takeOutDead(services, id, read)).toBe(true);
  await Promise.all(tasks);
  expect(logged).toEqual([]);
  expect(await texts(later.openai, id)).toEqual(['user: step 1', 'assistant: echo: step 1']);
});
