import type { FaultyStore, StoreCall } from './faulty-store.ts';

/** Where a turn's process stops after its completion put: its `k`th storage call, or its journal's next put. */
export type Stop = number | 'last batch';

/** Whether `call` puts a batch of an event journal. */
export const journalPut = (call: StoreCall) => call.operation === 'put' && call.key.includes('/events/');

/**
 * Makes `faulty` a process that dies after a turn's completion put landed, at `stop` (that call
 * and every later one fail; Infinity: it lives): the journal batches it wrote, the call it
 * stopped at, and how many calls it made after the completion.
 */
export function diesAfterCompletion(faulty: FaultyStore, stop: Stop) {
  const state = { completed: false, after: 0, batches: 0, stopped: undefined as StoreCall | undefined };
  faulty.failWhen((call) => {
    if (state.completed && (++state.after === stop || (stop === 'last batch' && journalPut(call))))
      state.stopped ??= call;
    if (state.stopped) return true;
    if (journalPut(call)) state.batches += 1;
    if (call.operation === 'put' && call.key.endsWith('.done')) state.completed = true;
    return false;
  });
  return state;
}
