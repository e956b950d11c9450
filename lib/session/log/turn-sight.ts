import type { Receipt } from './receipt-schema.ts';

/** What a turn's model saw, rebuilt from its receipt's seq ranges (the turn receipts API, ./turns.ts). */

/** What the model saw, in seq runs, and the items no stored item stands for. */
export interface TurnSight {
  /** Every seq up to the turn's input, in runs: sent whole, compacted, or not at all. */
  seen: { first_seq: number; last_seq: number; treatment: Treatment }[];
  synthetic: {
    index: number;
    synthetic: string;
    chars: number;
    content?: string | undefined;
    name?: string | undefined;
  }[];
  /** With a compacted context: items before this seq reached the model only through the summary. */
  context_start_seq: number | null;
  abort: { name: string; stored_as: string; reason: string } | null;
  /** Images and files sent as text placeholders (lib/turn/receipt.ts says which). */
  media_as_text?: number;
}

export type Treatment = 'whole' | 'compacted' | 'dropped';

type SeqRange = { first_seq: number; last_seq: number };

/** What the model of a turn saw, from its receipt and the seqs its input and output hold (`summary`'s). */
export function sightOf(turn: {
  receipt: Receipt;
  summary: { input: SeqRange | null; output: SeqRange | null };
}): TurnSight | null {
  const { receipt, summary } = turn;
  const abort = receipt.abort ?? null;
  if (receipt.whole === undefined) return abort ? { seen: [], synthetic: [], context_start_seq: null, abort } : null;
  const end = summary.input?.last_seq ?? (summary.output ? summary.output.first_seq - 1 : 0);
  const marked: { first: number; last: number; treatment: Treatment }[] = [
    ...parseRanges(receipt.whole).map(([first, last]) => ({ first, last, treatment: 'whole' as const })),
    ...parseRanges(receipt.compacted ?? '').map(([first, last]) => ({ first, last, treatment: 'compacted' as const })),
  ].sort((a, b) => a.first - b.first);
  const seen: TurnSight['seen'] = [];
  let next = 1;
  const push = (first: number, last: number, treatment: Treatment) => {
    if (last < first) return;
    const previous = seen.at(-1);
    if (previous && previous.treatment === treatment && previous.last_seq === first - 1) previous.last_seq = last;
    else seen.push({ first_seq: first, last_seq: last, treatment });
  };
  for (const run of marked) {
    push(next, Math.min(run.first - 1, end), 'dropped');
    push(Math.max(run.first, next), Math.min(run.last, end), run.treatment);
    next = Math.max(next, run.last + 1);
  }
  push(next, end, 'dropped');
  const start = receipt.context?.context_start_seq;
  return {
    seen,
    synthetic: receipt.prompt?.synthetic ?? [],
    context_start_seq: typeof start === 'number' ? start : null,
    abort,
    ...(receipt.media_as_text ? { media_as_text: receipt.media_as_text } : {}),
  };
}

/** The treatment `runs` give `seq`. */
export function treatmentOf(runs: TurnSight['seen'], seq: number): Treatment {
  let low = 0;
  let high = runs.length - 1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    const run = runs[middle]!;
    if (seq < run.first_seq) high = middle - 1;
    else if (seq > run.last_seq) low = middle + 1;
    else return run.treatment;
  }
  return 'dropped';
}

/** `"1-3,5"` -> `[[1,3],[5,5]]`. */
function parseRanges(text: string): [number, number][] {
  if (text === '') return [];
  return text.split(',').map((part) => {
    const [first, last] = part.split('-').map(Number) as [number, number | undefined];
    return [first, last ?? first];
  });
}
