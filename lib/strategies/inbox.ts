import { z } from 'zod';
import type { Strategy } from './strategy.ts';

/**
 * `inbox`: hands the items to the context's `inbox` hook, which appends the notices the
 * turn consumed beforehand (as `{type: 'message', role: 'user', content, synthetic:
 * 'inbox'}`). Without a hook it changes nothing. Inbox I/O is asynchronous, so the turn
 * consumes the notices before preparing the prompt; this strategy only places them.
 */
export const inbox: Strategy = {
  name: 'inbox',
  configSchema: z.object({}),
  apply(items, _config, context) {
    return context.inbox ? context.inbox([...items]) : [...items];
  },
  tailRequirement() {
    return null;
  },
};
