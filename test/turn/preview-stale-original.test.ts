import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { recordingEcho, turnWorld, seen } from '../support/turn-world.ts';

describe('previewPrompt after a turn whose delete of a notice it delivered failed', () => {
  it('leaves out the original left in the inbox, as the next turn removes it', async () => {
    const store = new MemoryStore();
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(store, model);
    await sessions.create({ id: 's' });
    await inbox.post('s', { name: '0001-n', content: 'budget low' });
    const failing = new FaultyStore(store).failWhen(
      ({ operation, key }) => operation === 'delete' && key.endsWith('/inbox/0001-n'),
    );
    const first = await runTurn(turnWorld(failing, model).services, 's', { input: [] });
    expect(first.context.notices_delivered).toEqual(['0001-n']);
    expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(['0001-n']);
    const preview = await previewPrompt(services, 's', {});
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual([]);
    expect(preview.context.notices_pending).toEqual(turn.context.notices_delivered);
    expect(seen(model.prompts.at(-1)!)).toEqual(seen(preview.items));
  });
});
