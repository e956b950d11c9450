import { NotFoundError } from '../errors.ts';
import type { StoredItem } from '../items.ts';
import type { ContextStart } from '../session/records.ts';
import { OpenAIApiError } from './errors.ts';
import type { Facade } from './facade.ts';
import { itemId, namesCompaction, parseCompactionId, parseItemId, parseReasoningId } from './ids.ts';
import { storedItemId } from './listed-items.ts';
import type { InputPartBody } from './input-content.ts';
import type { InputItemBody } from './request-input.ts';
import type { ResponseCreateBody } from './schemas.ts';
import { itemsBetween } from './sessions.ts';

/**
 * A create's input with each `item_reference` replaced by the stored item it names, and where
 * each entry was in `input` (`origins`): the AI SDK sends a stored response's output back so
 * (`store: true`, its default), in a tool loop and in a chat that resends its messages. One
 * read per conversation referenced, of the seqs between its first and last reference. A
 * reference that names no stored item is a 404 naming it (`input[<i>].id`, `field`), as OpenAI
 * answers; one to an item with images or files is a 400 (send the item itself: a model writes
 * neither, so the SDK never references one). A compaction item's id
 * (`cmp_<conversation>_<start seq>`) stands for the conversation's current compaction item (one
 * read of its context per conversation); one a later compaction folded in is left out when a
 * compaction item follows it in the input (which replaces everything before it), else it stands
 * for that compaction's summary as it was stored (SessionLog.contextAt), and a cmp_ id that
 * names no compaction of the conversation is a 404. A reasoning item's id
 * (`rs_<conversation>_<seq>_<n>`) stands for that reasoning of the stored item, its
 * `encrypted_content` included (which goes with the item after it, inputToItems). An id of an
 * item a delete of the newest turn took out names another generation than the item that took
 * its seq (lib/openai/ids.ts): a 404, as any id naming no stored item (one more read per
 * conversation referenced, of its config).
 */
export async function resolveItemReferences(
  facade: Facade,
  input: ResponseCreateBody['input'],
  /** The request's field of the input, which a refusal names. */
  field = 'input',
): Promise<{ input: string | InputItemBody[]; origins: number[] }> {
  if (typeof input === 'string') return { input, origins: [0] };
  const wanted = new Map<string, { from: number; to: number }>();
  for (const entry of input) {
    const ref = entry.type === 'item_reference' ? (parseItemId(entry.id) ?? parseReasoningId(entry.id)) : undefined;
    if (!ref) continue;
    const range = wanted.get(ref.sessionId);
    wanted.set(ref.sessionId, {
      from: Math.min(range?.from ?? ref.seq, ref.seq),
      to: Math.max(range?.to ?? 0, ref.seq + 1),
    });
  }
  const stored = new Map<string, StoredItem>();
  const compactions = new Map<string, ContextStart | null>();
  for (const entry of input) {
    const ref = entry.type === 'item_reference' ? parseCompactionId(entry.id) : undefined;
    if (ref) compactions.set(ref.sessionId, null);
  }
  await Promise.all([
    ...[...compactions.keys()].map(async (sessionId) => {
      facade.authorize(sessionId);
      const context = await facade.services.sessions.currentContext(sessionId).catch((error: unknown) => {
        if (error instanceof NotFoundError) return null;
        throw error;
      });
      compactions.set(sessionId, context);
    }),
    ...[...wanted].map(async ([sessionId, { from, to }]) => {
      facade.authorize(sessionId);
      const read = await Promise.all([
        itemsBetween(facade, sessionId, from, to),
        facade.services.sessions.scope(sessionId),
      ]).catch((error: unknown) => {
        if (error instanceof NotFoundError) return undefined;
        throw error;
      });
      if (!read) return;
      // Keyed by the id an item's reasoning has: an id of a deleted item (another generation) finds none.
      const [items, scope] = read;
      for (const item of items) stored.set(storedItemId(scope, 'reasoning', item.seq), item);
    }),
  ]);
  const compactionAfter = (index: number) =>
    input
      .slice(index + 1)
      .some((entry) => entry.type === 'compaction' || (entry.type === 'item_reference' && parseCompactionId(entry.id)));
  // A compaction a later one superseded, which the input goes on from: its summary as it was stored.
  const superseded = new Map<string, { summary: string } | null>();
  await Promise.all(
    input.map(async (entry, index) => {
      if (entry.type !== 'item_reference' || superseded.has(entry.id)) return;
      const ref = parseCompactionId(entry.id);
      const current = ref && compactions.get(ref.sessionId);
      if (!ref || !current || current.start_seq <= ref.startSeq || compactionAfter(index)) return;
      superseded.set(entry.id, null);
      const older = await facade.services.sessions.contextAt(ref.sessionId, ref.startSeq);
      superseded.set(entry.id, namesCompaction(ref, older) ? older : null);
    }),
  );
  const resolved = input.map((entry, index): InputItemBody[] => {
    if (entry.type !== 'item_reference') return [entry];
    const reasoning = parseReasoningId(entry.id);
    if (reasoning) {
      // The model's reasoning, sent back: it goes with the item after it (inputToItems).
      const item = stored.get(itemId('reasoning', reasoning.sessionId, reasoning.seq, reasoning.generation));
      const found = item && 'reasoning' in item ? item.reasoning?.[reasoning.n - 1] : undefined;
      if (!found)
        throw new OpenAIApiError(404, 'not_found', `Item with id '${entry.id}' not found.`, `${field}[${index}].id`);
      return [found];
    }
    const compaction = parseCompactionId(entry.id);
    if (compaction) {
      const context = compactions.get(compaction.sessionId);
      if (namesCompaction(compaction, context))
        return [{ type: 'compaction', id: entry.id, encrypted_content: context!.summary }];
      if (context && context.start_seq > compaction.startSeq && compactionAfter(index)) return [];
      const older = superseded.get(entry.id);
      if (older) return [{ type: 'compaction', id: entry.id, encrypted_content: older.summary }];
      throw new OpenAIApiError(404, 'not_found', `Item with id '${entry.id}' not found.`, `${field}[${index}].id`);
    }
    const ref = parseItemId(entry.id);
    const item = ref && stored.get(itemId('reasoning', ref.sessionId, ref.seq, ref.generation));
    if (!ref || !item || item.type !== ref.kind)
      throw new OpenAIApiError(404, 'not_found', `Item with id '${entry.id}' not found.`, `${field}[${index}].id`);
    if (item.type === 'function_call')
      return [{ type: 'function_call', call_id: item.call_id, name: item.name, arguments: item.arguments }];
    const content = item.type === 'message' ? item.content : item.output;
    if (typeof content !== 'string' && content.some((part) => part.type !== 'input_text'))
      throw new OpenAIApiError(
        400,
        'invalid_request',
        `${field}[${index}].id: item_reference '${entry.id}' names an item with images or files; send the item itself`,
        `${field}[${index}].id`,
      );
    const text = content as string | Exclude<InputPartBody, { type: 'refusal' }>[];
    return [
      item.type === 'message'
        ? { type: 'message', role: item.role, content: text }
        : { type: 'function_call_output', call_id: item.call_id, output: text },
    ];
  });
  // Where each entry was in the request's input (a superseded compaction's reference may be left out).
  return { input: resolved.flat(), origins: resolved.flatMap((entries, index) => entries.map(() => index)) };
}
