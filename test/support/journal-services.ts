import { parseServiceConfig } from '../../lib/config.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import type { TurnServices } from '../../lib/turn/index.ts';
import { SessionLog } from './session-log.ts';

/**
 * What a turn's event journal needs, around `store`: session `id` with turn 1 claimed (open, `turn`),
 * and services whose `background` work is collected in `background` (the journal's last batch
 * is written there, after the response). The log keeps time by `clock` (the system's without it).
 */
export async function openTurnServices(store: ObjectStore, id: string, clock?: () => Date) {
  const sessions = new SessionLog(store, clock ? { clock } : {});
  await sessions.create({ id });
  const turn = await sessions.beginTurn(id, { input: [{ type: 'message', role: 'user', content: 'hi' }] });
  if (turn.kind !== 'claimed') throw new Error('expected a claim');
  const background: Promise<unknown>[] = [];
  const services = {
    sessions,
    log: () => {},
    config: parseServiceConfig({}),
    background: (task: Promise<unknown>) => void background.push(task),
  } as unknown as TurnServices;
  return { sessions, services, background, turn: turn.turn };
}
