import { z } from 'zod';
import type { Strategy } from './strategy.ts';

/** `none`: changes nothing. */
export const none: Strategy = {
  name: 'none',
  configSchema: z.object({}),
  apply(items) {
    return [...items];
  },
  tailRequirement() {
    return null;
  },
};
