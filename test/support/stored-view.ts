import { storedView } from '../../lib/session/view-check.ts';
import type { LogView } from '../../lib/session/view-records.ts';

/**
 * The view stored under `key` as `body`, as a reader of its own policy reads it (its tail's
 * items restored, lib/session/view-items.ts); its chunk, if it names one, is not read.
 */
export function parseView(key: string, body: Uint8Array): LogView {
  const { policy } = JSON.parse(new TextDecoder().decode(body)) as { policy: string };
  const view = storedView(key, body, policy);
  if (!view) throw new Error(`${key} is a view of another version`);
  return view;
}
