import { sessionLogFor } from '../../functions/services.ts';
import { parseServiceConfig } from '../../lib/config.ts';
import { responseId } from '../../lib/openai/ids.ts';
import { idGeneration } from '../../lib/session/log/rewind.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';

/** The facade's id of turn 1 of native session `session` on `store` (its one input item at seq 1). */
export async function nativeResponseId(store: ObjectStore, session: string): Promise<string> {
  const scope = await sessionLogFor(store, parseServiceConfig({ API_TOKEN: 'token' })).scope(session);
  const generation = idGeneration(scope, 1);
  return responseId({ sessionId: session, turn: 1, inputSeq: 1, outputSeq: 2, ...(generation ? { generation } : {}) });
}
