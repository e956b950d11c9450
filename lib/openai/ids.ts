/**
 * The ids of the OpenAI-compatible API (functions/routes/openai/). A conversation is a
 * session and a response is one of its turns, so every id names what it points at and no
 * index is needed to find it:
 *
 * - conversation: the session id itself (`[A-Za-z0-9_-]{1,64}`); sessions the facade creates
 *   are named `conv_<24 hex>`.
 * - response: `resp_<session>_<turn>_<first input seq>_<first output seq>`. The turn number
 *   says whether the response is the session's newest turn; the two seqs locate its input
 *   and output items in the history. The numbers are the last three `_` fields, so a session
 *   id holding `_` parses back unchanged. A turn taken after a delete of the newest turn takes
 *   the deleted one's number and seqs again, in a new generation of the session: its id ends
 *   `_<generation>` (`g` and 21 characters; lib/session/log/rewind.ts, idGeneration), so an id of
 *   the deleted turn names nothing. Ids without it are those of the turns no delete went back
 *   past, every id issued before generations were named included.
 * - item: `msg_<session>_<seq>` (messages), `fc_<session>_<seq>` (function calls),
 *   `fco_<session>_<seq>` (function call outputs); the model's reasoning before the item at a
 *   seq, `rs_<session>_<seq>_<n>` (n from 1: the item's n-th reasoning entry), names no item of
 *   its own (parseItemId takes none; parseReasoningId reads it). An item a turn taken after a
 *   delete of the newest turn holds (a generation that delete wrote: lib/session/log/rewind.ts,
 *   itemGeneration) has the seq of a deleted one, so its id names that generation after the seq
 *   (`msg_<session>_<seq>_<generation>`, `rs_<session>_<seq>_<generation>_<n>`): an id of a
 *   deleted item names nothing.
 * - compaction: `cmp_<session>_<start seq>`, the summary that opens the context at that seq; one a
 *   delete of the newest turn's generation wrote (one made after the delete, at the start seq of a
 *   deleted one, say) names it after the seq (`cmp_<session>_<start seq>_<generation>`), so an id
 *   of a deleted response's compaction names nothing.
 *
 * Ids of responses that are not stored (`store: false`, chat completions) are random.
 */

import { randomHex } from '../hash.ts';

// Numbers as the ids write them (every one is at least 1): no leading zero, so no two ids name one thing.
const NUMBER = '([1-9]\\d{0,14})';
const GENERATION = '(?:_(g\\d{13}[0-9a-f]{8}))?';
const RESPONSE = new RegExp(`^resp_([A-Za-z0-9_-]{1,64})_${NUMBER}_${NUMBER}_${NUMBER}${GENERATION}$`);
const ITEM = new RegExp(`^(msg|fc|fco)_([A-Za-z0-9_-]{1,64})_${NUMBER}${GENERATION}$`);

export interface ResponseRef {
  sessionId: string;
  turn: number;
  /** Seq of the first input item of the turn. */
  inputSeq: number;
  /** Seq of the first output item (input seq + the number of input items). */
  outputSeq: number;
  /** The session's generation holding the turn, when a delete of the newest turn wrote it. */
  generation?: string;
}

export type ItemKind = 'message' | 'function_call' | 'function_call_output' | 'reasoning';

const ITEM_PREFIX: Record<ItemKind, string> = {
  message: 'msg',
  function_call: 'fc',
  function_call_output: 'fco',
  reasoning: 'rs',
};

export function responseId(ref: ResponseRef): string {
  const base = `resp_${ref.sessionId}_${ref.turn}_${ref.inputSeq}_${ref.outputSeq}`;
  return ref.generation ? `${base}_${ref.generation}` : base;
}

/** The parts of a response id, or undefined when it is not one of ours. */
export function parseResponseId(id: string): ResponseRef | undefined {
  const match = RESPONSE.exec(id);
  if (!match) return undefined;
  const [turn, inputSeq, outputSeq] = [Number(match[2]), Number(match[3]), Number(match[4])];
  if (turn < 1 || inputSeq < 1 || outputSeq <= inputSeq) return undefined;
  const ref = { sessionId: match[1]!, turn, inputSeq, outputSeq };
  return match[5] ? { ...ref, generation: match[5] } : ref;
}

/**
 * The id of the item at `seq` (of its reasoning, `kind` `reasoning`, without its `_<n>`) held by
 * `generation` (lib/session/log/rewind.ts, itemGeneration).
 */
export function itemId(kind: ItemKind, sessionId: string, seq: number, generation?: string): string {
  const base = `${ITEM_PREFIX[kind]}_${sessionId}_${seq}`;
  return generation ? `${base}_${generation}` : base;
}

/**
 * The id of a session's compaction that starts the context at `start_seq`, naming the generation
 * that wrote it when a delete of the newest turn wrote that one (lib/session/records.ts,
 * ContextStart.generation).
 */
export function compactionId(
  sessionId: string,
  context: { start_seq: number; generation?: string | undefined },
): string {
  const base = `cmp_${sessionId}_${context.start_seq}`;
  return context.generation ? `${base}_${context.generation}` : base;
}

const COMPACTION = new RegExp(`^cmp_([A-Za-z0-9_-]{1,64})_${NUMBER}${GENERATION}$`);

export interface CompactionRef {
  sessionId: string;
  startSeq: number;
  generation?: string;
}

/** The session, start seq and generation (when it names one) of a compaction item id, or undefined. */
export function parseCompactionId(id: string): CompactionRef | undefined {
  const match = COMPACTION.exec(id);
  const startSeq = Number(match?.[2]);
  if (!match || startSeq < 2) return undefined;
  const ref = { sessionId: match[1]!, startSeq };
  return match[3] ? { ...ref, generation: match[3] } : ref;
}

/**
 * Whether compaction id `ref` names `context`: its start seq and generation. An id of a compaction
 * a delete took out names another generation (or none) than the one that took its start seq.
 */
export function namesCompaction(
  ref: CompactionRef,
  context: { start_seq: number; generation?: string | undefined } | null | undefined,
): boolean {
  return context?.start_seq === ref.startSeq && context.generation === ref.generation;
}

/** The session, seq and generation (when it names one) of an item id, or undefined. */
export function parseItemId(
  id: string,
): { kind: ItemKind; sessionId: string; seq: number; generation?: string } | undefined {
  const match = ITEM.exec(id);
  if (!match) return undefined;
  const kind = (Object.keys(ITEM_PREFIX) as ItemKind[]).find((key) => ITEM_PREFIX[key] === match[1])!;
  const seq = Number(match[3]);
  const ref = { kind, sessionId: match[2]!, seq };
  return match[4] ? { ...ref, generation: match[4] } : ref;
}

const REASONING = new RegExp(`^rs_([A-Za-z0-9_-]{1,64})_${NUMBER}${GENERATION}_${NUMBER}$`);

/**
 * The session, seq, generation (when it names one) and place (`n`, from 1) of a stored reasoning
 * item's id (`rs_<session>_<seq>_<n>`, `rs_<session>_<seq>_<generation>_<n>`), or none.
 */
export function parseReasoningId(
  id: string,
): { sessionId: string; seq: number; n: number; generation?: string } | undefined {
  const match = REASONING.exec(id);
  if (!match) return undefined;
  const ref = { sessionId: match[1]!, seq: Number(match[2]), n: Number(match[4]) };
  return match[3] ? { ...ref, generation: match[3] } : ref;
}

/** `<prefix>_<24 hex>`: the id of a new conversation, or of anything that is not stored. */
export function randomId(prefix: string): string {
  return `${prefix}_${randomHex(12)}`;
}
