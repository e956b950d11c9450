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

/**
 * How many generations a flattened history's ids may name (SessionConfig `named`, log/flatten.ts):
 * past them, the oldest stays and those just above it go (log/flatten-copy.ts `capped`), the ids of
 * their turns then naming a generation no longer listed (404, never another turn).
 */
export const MAX_NAMED_GENERATIONS = 32;

/** One entry of a config's `named`: the generation the ids of the items up to `seq` name. */
export const namedPointSchema = z
  .object({ generation: z.string().regex(generationSchemaPattern), seq: z.number().int().nonnegative() })
  .strict();
export type NamedPoint = z.infer<typeof namedPointSchema>;
