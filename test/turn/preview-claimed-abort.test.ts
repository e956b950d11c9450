import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn } from '../../lib/turn/index.ts';
import { FaultyStore } from '../support/faulty-store.ts';
import { recordingEcho, turnWorld, seen } from '../support/turn-world.ts';

describe('previewPrompt after a turn aborted by an `abort` whose delete failed', () => {
  it('shows the notices after the `abort` left in the inbox, as the next turn passes it over', async () => {
    const store = new MemoryStore();
    const model = recordingEcho();
    const { sessions, inbox, services } = turnWorld(store, model);
    await sessions.create({ id: 's' });
    await inbox.post('s', { name: 'abort', content: 'stop' });
    const failing = new FaultyStore(store).failWhen(
      ({ operation, key }) => operation === 'delete' && key.endsWith('/inbox/abort'),
    );
    await expect(runTurn(turnWorld(failing, model).services, 's', { input: [] })).rejects.toMatchObject({
      code: 'aborted',
    });
    await inbox.post('s', { name: 'note-b', content: 'disk full' });
    expect((await inbox.listPending('s')).map((notice) => notice.name)).toEqual(['abort', 'note-b']);
    const preview = await previewPrompt(services, 's', {});
    const turn = await runTurn(services, 's', { input: [] });
    expect(turn.context.notices_delivered).toEqual(['note-b']);
    expect(preview.context.notices_pending).toEqual(turn.context.notices_delivered);
    expect(seen(model.prompts.at(-1)!)).toEqual(seen(preview.items));
  });
});
