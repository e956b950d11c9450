import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import type { Model, ModelRequest, ModelResult } from '../../lib/models/model.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { runInProcess, type TurnServices } from '../../lib/turn/index.ts';
import type { SessionLog } from './session-log.ts';

/**
 * A model of id `openai-compatible:local-agent` (no family matches it: the fallback window) that
 * answers every call with `answer()` and records each prompt it gets in `prompts`.
 */
export function recordingModel(prompts: ModelRequest[], answer: () => ModelResult): Model {
  return {
    id: 'openai-compatible:local-agent',
    async generate(request) {
      prompts.push(request);
      return answer();
    },
    async *stream(request) {
      prompts.push(request);
      const done = answer();
      for (const item of done.output) yield { type: 'item_done', item };
      yield { type: 'done', result: done };
    },
  };
}

/**
 * The turn services of a test driving `model` over `sessions` (on `store`); background work
 * (packing) waits until `settle()`, as waitUntil would run it after each response.
 */
export function servicesFor(
  sessions: SessionLog,
  store: ObjectStore,
  model: Model,
): TurnServices & { sessions: SessionLog; settle: () => Promise<void> } {
  let pending: Promise<unknown>[] = [];
  return {
    sessions,
    inbox: new Inbox(store, { sessionExists: sessionExistsIn(store, '') }),
    config: parseServiceConfig({}),
    clock: () => new Date(),
    env: {},
    model: () => model,
    background: (task) => pending.push(task),
    startBackground(run) {
      return runInProcess(this, run);
    },
    log: () => {},
    info: () => {},
    settle: async () => {
      while (pending.length > 0) {
        const tasks = pending;
        pending = [];
        await Promise.all(tasks);
      }
    },
  };
}
