import { describe, expect, it } from 'vitest';
import { createServices } from '../../functions/services.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { decodeUtf8, listAll } from '../../lib/store/object-store.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { outboxSink } from '../../lib/webhooks/outbox.ts';
import { WEBHOOK_SECRET } from '../support/webhook-receiver.ts';

/**
 * The events a turn's close sends are stamped by the deployment's clock, the one its session log
 * goes by: `session.idle` as `turn.completed`, whatever the system's clock says.
 */

const FIXED = new Date(Date.UTC(2031, 4, 6, 7, 8, 9));

describe('session.idle', () => {
  it('is stamped by the clock the session log goes by', async () => {
    const clock = () => new Date(FIXED);
    const store = new MemoryStore({ clock });
    const tasks: Promise<unknown>[] = [];
    const services = createServices({
      store,
      config: parseServiceConfig({ WEBHOOK_URL: 'https://example.com/hook', WEBHOOK_SECRET }),
      env: {},
      model: () => echoModel,
      background: (task) => void tasks.push(task),
      log: () => {},
      info: () => {},
      clock,
      webhookSink: outboxSink(store, ''),
    });
    await services.sessions.create({ id: 's' });
    await runTurn(services, 's', { input: 'hello' });
    while (tasks.length > 0) await Promise.all(tasks.splice(0));

    const entries = await Promise.all(
      (await listAll(store, 'webhooks/outbox/')).map(async ({ key }) =>
        JSON.parse(decodeUtf8((await store.get(key))!.body)),
      ),
    );
    const events = entries.map((entry) => ({ created_at: entry.created_at, ...JSON.parse(entry.body) }));
    expect(events.map((event) => event.type).sort()).toEqual(['session.idle', 'turn.completed']);
    const stamp = FIXED.toISOString();
    for (const event of events) expect(event).toMatchObject({ created_at: stamp, timestamp: stamp });
    expect(events.find((event) => event.type === 'session.idle')!.data).toMatchObject({ turn: 1, idle_since: stamp });
  });
});
