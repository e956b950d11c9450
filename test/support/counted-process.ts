import { createApp } from '../../functions/app.ts';
import type { Model } from '../../lib/models/model.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { TOKEN } from '../http/http-suite.ts';
import { CountingStore } from './counting-store.ts';
import { FaultyStore, type StoreCall } from './faulty-store.ts';

/** A turn's log line, with the storage calls its process made until the line was written (`calls`). */
export type CountedLine = { turn: number | null; storage_ops: Record<string, number>; calls: StoreCall[] };

export interface CountedProcessOptions {
  environment: Record<string, string>;
  clock: () => Date;
  /** What a request's path is put after (`call('POST', '/turns')` under `/v1/sessions/s`). */
  base: string;
  model?: Model;
}

/**
 * A process of the app on `store` (seen as a counting store, every call it makes recorded), as a
 * server started afresh has it: nothing cached. `call` sends an admin request under `base`,
 * `drain` runs the background work its responses started, `lines` are its turns' log lines.
 */
export function countedProcess(store: ObjectStore, options: CountedProcessOptions) {
  const calls: StoreCall[] = [];
  const seen = new FaultyStore(store).failWhen((call) => {
    calls.push(call);
    return false;
  });
  const lines: CountedLine[] = [];
  const tasks: Promise<unknown>[] = [];
  const app = createApp({
    store: () => new CountingStore(seen),
    readEnvironment: () => options.environment,
    log: () => {},
    info: () => {},
    logLine: (line) => void lines.push({ ...JSON.parse(line), calls: [...calls] }),
    clock: options.clock,
    ...(options.model ? { wrapModel: () => options.model! } : {}),
    afterResponse: (task) => void tasks.push(task),
  });
  const call = async (method: string, path: string, body?: object) => {
    const response = await app.request(`http://tailgate.test${options.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json().catch(() => null)) as any };
  };
  const drain = async () => {
    while (tasks.length > 0) await Promise.allSettled(tasks.splice(0));
  };
  return { call, drain, calls, lines, app };
}
