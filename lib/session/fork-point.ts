import { z } from 'zod';
import { idSchema } from '../items.ts';
import { generationSchemaPattern } from './keys.ts';

/** A fork reads at most this many incarnations before its own (docs/API.md, "Forks"). */
export const MAX_FORK_DEPTH = 8;

/** One entry of a fork's `fork_of` (lib/session/keys.ts `ForkPoint`): an incarnation, read up to a record. */
export const forkPointSchema = z
  .object({
    id: idSchema,
    generation: z.string().regex(generationSchemaPattern),
    record: z.number().int().positive(),
    seq: z.number().int().nonnegative(),
  })
  .strict();
