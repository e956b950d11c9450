import { z } from 'zod';

/** The fields of a config (`session.json`, records.ts `sessionConfigSchema`) that tell its incarnation. */
const incarnationSchema = z.object({ generation: z.string().optional(), incarnation: z.string().optional() });

const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: false });

/**
 * Whether a config's bytes are of the incarnation that began as `generation` (an import's): it names
 * that generation, or a delete of its newest turn moved it on to another, keeping `incarnation`, the
 * generation it began with (log/import-pending.ts `sameIncarnation`). Told by the fields, not the
 * text: a config of another session may carry the generation elsewhere (in its metadata, or in the
 * `fork_of` of a fork of that incarnation created under the id since it was deleted).
 */
export function ofIncarnation(body: Uint8Array, generation: string): boolean {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(body));
  } catch {
    return false;
  }
  const fields = incarnationSchema.safeParse(parsed);
  return fields.success && (fields.data.generation === generation || fields.data.incarnation === generation);
}
