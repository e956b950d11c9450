import { describe, expect, it } from 'vitest';
import { clientError } from '../../lib/errors.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { doneKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A keyed turn that failed, replayed from a completion that stores no error of it, fails as a
// model failure that names the model, as docs/API.md has every `model_error`: the session's model
// (not the deployment's default) when the request named none.

describe('a replayed failure whose completion stores no error', () => {
  it('is a model_error naming the model', async () => {
    const store = new MemoryStore();
    const model = hookedEcho('echo', async () => {
      throw new ModelError('provider down', { model: 'openai:gpt-4.1' });
    });
    const world = turnWorld(store, model);
    await world.sessions.create({ id: 's', model: 'openai:gpt-4.1' });
    const keyed = { idempotencyKey: 'k1' };
    await expect(runTurn(world.services, 's', { input: 'hi' }, keyed)).rejects.toMatchObject({ code: 'model_error' });
    const key = doneKey(await world.sessions.scope('s'), 1);
    const stored = JSON.parse(new TextDecoder().decode((await store.get(key))!.body));
    delete stored.error;
    await store.put(key, JSON.stringify(stored));
    const error = await runTurn(world.services, 's', { input: 'hi' }, keyed).then(
      () => expect.fail('the turn was replayed as completed'),
      (failure: any) => failure,
    );
    expect(clientError(error)).toEqual({
      code: 'model_error',
      message: 'the model call failed',
      details: { model: 'openai:gpt-4.1' },
    });
  });
});
