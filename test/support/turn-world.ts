import { parseServiceConfig } from '../../lib/config.ts';
import { Inbox } from '../../lib/inbox/inbox.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { PromptItem } from '../../lib/items.ts';
import type { Model, ModelRequest, ModelStreamEvent } from '../../lib/models/model.ts';
import { sessionExistsIn } from '../../lib/session/log/config-object.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { pickUpAfterLeaseClose, pickUpFirst, runInProcess, type TurnServices } from '../../lib/turn/index.ts';
import { SessionLog } from './session-log.ts';

/**
 * The echo model under another id, with hooks around each call (generate or stream alike):
 * `before` runs ahead of the answer, `answered` once the whole answer is there (in a stream,
 * before its `done` event is yielded).
 */
export function hookedEcho(
  id: string,
  before: (request: ModelRequest) => Promise<void>,
  answered: () => void = () => {},
): Model {
  return {
    id,
    // It takes images and files wherever the echo model does.
    toolResultMedia: true,
    fileUrls: true,
    assistantMedia: true,
    async generate(request) {
      await before(request);
      const result = await echoModel.generate(request);
      answered();
      return result;
    },
    async *stream(request): AsyncIterable<ModelStreamEvent> {
      await before(request);
      for await (const event of echoModel.stream(request)) {
        if (event.type === 'done') answered();
        yield event;
      }
    },
  };
}

/** Compaction with a trigger and a kept share of a few tokens: it summarizes all but the newest turn's input. */
export const COMPACTING = {
  strategies: ['compact'],
  strategy_config: { context_limit: 100_000, compact_trigger_ratio: 0.0001, compact_keep_ratio: 0.0001 },
};

/** The texts of a prompt's user messages but the synthetic ones (summaries, notices). */
/** What the model reads of prompt items: the preview's `pending` marks and the stored `created_at` aside. */
export function seen(items: readonly PromptItem[]): unknown[] {
  return items.map((item) => {
    const { pending: _pending, created_at: _createdAt, ...rest } = item as PromptItem & { created_at?: string };
    return rest;
  });
}

export const userTexts = (prompt: readonly PromptItem[]) =>
  prompt.flatMap((item) =>
    item.type === 'message' && item.role === 'user' && item.synthetic === undefined ? [item.content] : [],
  );

/** The echo model, keeping every prompt it was sent. */
export function recordingEcho(): Model & { prompts: PromptItem[][] } {
  const prompts: PromptItem[][] = [];
  return {
    id: echoModel.id,
    toolResultMedia: true,
    fileUrls: true,
    assistantMedia: true,
    prompts,
    generate: (request: ModelRequest) => {
      prompts.push(request.prompt);
      return echoModel.generate(request);
    },
    stream: (request: ModelRequest) => {
      prompts.push(request.prompt);
      return echoModel.stream(request);
    },
  };
}

/**
 * A turn's services on `store` with `model` as the default model, background work dropped
 * (nothing packs) and logs discarded: the setup of tests that watch one turn's storage calls.
 * With `clock` and `leaseMs`, the session log and the inbox read that clock and turns hold
 * leases of that length (TURN_LEASE_MS). With `kept`, background work (a queued input's turn
 * among it) is kept there instead, and queued inputs are taken up as the service's log takes
 * them (functions/services.ts): by a new turn's claim first, and after a lapsed lease's close.
 */
export function turnWorld(
  store: ObjectStore,
  model: Model,
  timing: { clock?: () => Date; leaseMs?: number; kept?: Promise<unknown>[] } = {},
) {
  const { clock, leaseMs, kept } = timing;
  const sessions = new SessionLog(store, {
    ...(clock ? { clock } : {}),
    ...(leaseMs ? { leaseMs } : {}),
    ...(kept
      ? { onQueueWaiting: pickUpFirst(() => services), onLeaseClosed: pickUpAfterLeaseClose(() => services) }
      : {}),
  });
  const inbox = new Inbox(store, {
    ...(clock ? { clock } : {}),
    log: () => {},
    sessionExists: sessionExistsIn(store, ''),
  });
  const services: TurnServices = {
    sessions,
    inbox,
    config: parseServiceConfig(leaseMs ? { TURN_LEASE_MS: String(leaseMs) } : {}),
    clock: clock ?? (() => new Date()),
    env: { DEFAULT_MODEL: model.id },
    model: () => model,
    background: kept ? (task) => void kept.push(task.catch(() => undefined)) : () => undefined,
    startBackground: (run) => runInProcess(services, run),
    log: () => {},
    info: () => {},
  };
  return { sessions, inbox, services };
}
