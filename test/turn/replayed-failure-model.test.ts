import { describe, expect, it } from 'vitest';
import { TailgateError } from '../../lib/errors.ts';
import { clientError } from '../../lib/error-codes.ts';
import { ModelError } from '../../lib/models/errors.ts';
import { doneKey } from '../../lib/session/keys.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { hookedEcho, turnWorld } from '../support/turn-world.ts';

// A keyed turn that failed, replayed from a completion that stores no error of it, fails as a
// model failure that names the model, as docs/API.md has every `model_error`: the one the failed
// turn ran with (its receipt's), else the request's, else the session's (not the deployment's
// default).

/** A world whose models fail every call and are the model they are asked for, in a session `s` of `model`. */
async function failingWorld(model: string) {
  const store = new MemoryStore();
  const failing = (id: string) =>
    hookedEcho(id, async () => {
      throw new ModelError('provider down', { model: id });
    });
  const world = turnWorld(store, failing(model));
  const services = { ...world.services, model: failing };
  await world.sessions.create({ id: 's', model });
  return { store, world, services };
}

/** Fails keyed turn 1 of session `s`, then drops the error its completion stores, with `edit` of what stays. */
async function failedWithoutError(
  { store, world, services }: Awaited<ReturnType<typeof failingWorld>>,
  edit: (stored: Record<string, unknown>) => void = () => {},
  input = 'hi',
): Promise<void> {
  await expect(runTurn(services, 's', { input }, { idempotencyKey: 'k1' })).rejects.toBeInstanceOf(TailgateError);
  const key = doneKey(await world.sessions.scope('s'), 1);
  const stored = JSON.parse(new TextDecoder().decode((await store.get(key))!.body));
  delete stored.error;
  edit(stored);
  await store.put(key, JSON.stringify(stored));
}

/** What a retry of turn 1 under its key answers. */
async function replayed(
  services: Awaited<ReturnType<typeof failingWorld>>['services'],
  input = 'hi',
): Promise<unknown> {
  const error = await runTurn(services, 's', { input }, { idempotencyKey: 'k1' }).then(
    () => expect.fail('the turn was replayed as completed'),
    (failure: TailgateError) => failure,
  );
  return clientError(error);
}

const modelError = (model: string) => ({ code: 'model_error', message: 'the model call failed', details: { model } });

describe('a replayed failure whose completion stores no error', () => {
  it('is a model_error naming the model', async () => {
    const world = await failingWorld('openai:gpt-4.1');
    await failedWithoutError(world);
    expect(await replayed(world.services)).toEqual(modelError('openai:gpt-4.1'));
  });

  it('names the model the failed turn ran with, not the one the session was changed to since', async () => {
    const world = await failingWorld('openai:gpt-4.1');
    await failedWithoutError(world);
    await world.world.sessions.update('s', { model: 'anthropic:claude-sonnet-4-5' });
    expect(await replayed(world.services)).toEqual(modelError('openai:gpt-4.1'));
  });

  it('names the model the failed turn ran with once its completion is packed into a segment', async () => {
    const world = await failingWorld('openai:gpt-4.1');
    await failedWithoutError(world);
    await world.world.sessions.update('s', { model: 'anthropic:claude-sonnet-4-5' });
    for (const content of ['two', 'three'])
      await world.world.sessions.append('s', [{ type: 'message', role: 'user', content }]);
    await world.world.sessions.pack('s', { refresh: true });
    expect((await world.store.get(doneKey(await world.world.sessions.scope('s'), 1)))?.body.length).toBe(0);
    expect(await replayed(world.services)).toEqual(modelError('openai:gpt-4.1'));
  });

  it('names the model of a turn that failed before its prompt was built, as its receipt does', async () => {
    // A prompt over the window of the model (one with a known window) fails before the receipt
    // of what the model saw exists.
    const world = await failingWorld('openai:gpt-4');
    const input = 'y'.repeat(40_000);
    await failedWithoutError(world, () => {}, input);
    expect(await world.world.sessions.getTurn('s', 1)).toMatchObject({ status: 'failed', model: 'openai:gpt-4' });
    await world.world.sessions.update('s', { model: 'anthropic:claude-sonnet-4-5' });
    expect(await replayed(world.services, input)).toEqual(modelError('openai:gpt-4'));
  });

  it("names the session's model when the completion, an older one, keeps no model", async () => {
    const world = await failingWorld('openai:gpt-4.1');
    await failedWithoutError(world, (stored) => {
      stored.receipt = { strategies: [] };
    });
    await world.world.sessions.update('s', { model: 'anthropic:claude-sonnet-4-5' });
    expect(await replayed(world.services)).toEqual(modelError('anthropic:claude-sonnet-4-5'));
  });
});
