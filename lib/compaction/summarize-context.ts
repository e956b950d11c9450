import type { PromptItem } from '../items.ts';
import { ModelError, ModelTimeoutError } from '../models/errors.ts';
import { startDeadline, untilAborted } from '../models/deadline.ts';
import type { Model, ModelUsage } from '../models/model.ts';
import { usageReported } from '../ledger/usage.ts';
import { markReach, providerUnreached } from '../models/provider-reach.ts';
import type { ContextStart } from '../session/records.ts';
import type { NewContext } from '../session/session-log.ts';
import { modelFamily, outputRoom, type TokenBudget } from '../tokens/model-limits.ts';
import {
  APPROXIMATE_CHARACTERS_PER_TOKEN,
  approximateTokenCounter,
  countPromptTokens,
  promptItemTokens,
} from '../tokens/token-counter.ts';
import type { CompactionPlan } from './plan-compaction.ts';
import { clipText, DEFAULT_SUMMARY_PROMPT, renderTranscript } from './summary-transcript.ts';

/** The transcript of a context whose items all make no line (renderTranscript). */
const EMPTY_TRANSCRIPT = '(the transcript is empty: nothing was said)';

/**
 * A window a summary call is made in; with its response reserve, the call asks for no more output
 * than it, nor than the summary model's family's default reserve (within the model's most output:
 * gpt-4o refuses more than 16,384, gpt-4.1 more than 32,768), a session's own reserve above it included.
 */
export type SummaryWindow = Pick<TokenBudget, 'contextLimit' | 'counter'> &
  Partial<Pick<TokenBudget, 'responseReserve'>>;

export interface SummarizeOptions {
  /** The summary model's instructions; DEFAULT_SUMMARY_PROMPT when absent. */
  prompt?: string;
  /** The summary is cut to about this many tokens (and the model asked for no more). */
  maxSummaryTokens: number;
  /**
   * The window the summary call's prompt and answer share, and the counter that estimates the
   * prompt: the call asks for no more than the window leaves (`ModelRequest.outputRoom`), and the
   * summary is clipped at the counter's characters a token (`TokenCounter.charactersPerToken`).
   */
  window?: SummaryWindow;
  /**
   * The summary model's own window, where it is not `window`'s (lib/compaction/summary-budget.ts
   * `summaryCallWindow`): the call's room is reckoned in it, the summary still clipped by `window`'s
   * counter (the prompt it goes in).
   */
  callWindow?: SummaryWindow;
  /** Aborts the summary's model call (a turn its lease renewal found closed by someone else). */
  signal?: AbortSignal;
  /**
   * The call's deadline (ms, MODEL_TIMEOUT_MS): past it the call is aborted and the summary fails
   * with ModelTimeoutError, whether or not the model heeds the abort.
   */
  timeoutMs?: number;
  /**
   * Told the estimate SummaryTimeoutError carries when `signal` aborted the call (its turn closed
   * by someone else): the provider bills what it worked on all the same, unless its model told it
   * never got the call (lib/models/provider-reach.ts).
   */
  onAborted?: (spent: ModelUsage) => void;
}

/** A summary made: the context start it gives, and what its model call used (charged to the session). */
export interface Summary {
  context: NewContext;
  usage: ModelUsage;
}

/**
 * The summary's model call timed out (its deadline, or the provider's) when its provider may have
 * run the model (lib/models/provider-reach.ts: a request in flight, or answered with a 2xx; not
 * one refused and waiting to retry, which fails with a plain ModelTimeoutError and bills nothing):
 * the provider worked on it and bills it, but reported nothing. `spent` is an estimate, the
 * summary prompt's tokens (by its window's counter, else approximated) and no output (the call
 * is not streamed), which its caller charges as the summary's usage would have been.
 */
export class SummaryTimeoutError extends ModelTimeoutError {
  readonly spent: ModelUsage;

  constructor(timeout: ModelTimeoutError, spent: ModelUsage) {
    super(timeout.message, timeout.details);
    this.spent = spent;
  }
}

/**
 * Summarizes the part of the context a plan cuts off, with `model`: the summary prompt as
 * a system message, the transcript (the previous summary first, then the summarized items)
 * as the user message. The reply is clipped to `maxSummaryTokens` (approximated), so a
 * summary never outgrows its budget. Tools are not offered: nothing is run or replayed.
 */
export async function summarizeContext(
  model: Model,
  previous: ContextStart | null,
  plan: CompactionPlan,
  options: SummarizeOptions,
): Promise<Summary> {
  const transcript = renderTranscript(previous?.summary ?? null, plan.summarized, new Set(plan.interrupted));
  const prompt: PromptItem[] = [
    { type: 'message', role: 'system', content: options.prompt ?? DEFAULT_SUMMARY_PROMPT },
    // Items the model was never sent (blank messages) make no line: a transcript of those alone
    // still gives the model a message to answer (providers refuse a prompt of instructions only).
    { type: 'message', role: 'user', content: transcript || EMPTY_TRANSCRIPT },
  ];
  const maxOutputTokens = Math.max(1, Math.floor(options.maxSummaryTokens));
  const { window } = options;
  const call = options.callWindow ?? window;
  const room = call && outputRoom(call.contextLimit, () => countPromptTokens(prompt, [], call.counter));
  // A session's own reserve may pass the model's most output, which its family's default is within.
  const reserve = Math.min(
    call?.responseReserve || Number.POSITIVE_INFINITY,
    modelFamily(model.id)?.responseReserve ?? Number.POSITIVE_INFINITY,
  );
  const request = {
    prompt,
    tools: [],
    maxOutputTokens: Math.min(maxOutputTokens, reserve),
    ...(room !== undefined ? { outputRoom: room } : {}),
  };
  // Counted as the call's window counts it (Claude's 3 characters a token), else approximated.
  const counter = call?.counter ?? approximateTokenCounter;
  const promptTokens = () => promptItemTokens(prompt, counter).reduce((sum, tokens) => sum + tokens, 0);
  const result = await withDeadline(options, (signal) =>
    model.generate({ ...request, ...(signal ? { signal } : {}) }),
  ).catch((error: unknown) => {
    const aborted = options.signal?.aborted === true;
    if (!(error instanceof ModelTimeoutError) && !aborted) throw error;
    // Its provider never got the call (refused, stopped waiting to retry): nothing is billed.
    if (providerUnreached(error)) throw error;
    const input_tokens = promptTokens();
    // Stopped by the caller (whose turn someone else closed): the caller answers with its stop's reason.
    if (aborted) {
      options.onAborted?.({ input_tokens, output_tokens: 0 });
      throw error;
    }
    throw new SummaryTimeoutError(error as ModelTimeoutError, { input_tokens, output_tokens: 0 });
  });
  const text = result.output
    .flatMap((item) => (item.type === 'message' ? [item.content] : []))
    .join('\n')
    .trim();
  if (text === '') throw new ModelError('the summary model answered without text', { model: model.id });
  const perToken = window?.counter.charactersPerToken ?? APPROXIMATE_CHARACTERS_PER_TOKEN;
  const summary = clipText(text, maxOutputTokens * perToken);
  // A backend that left its usage out (no input count) still ran the call: estimated so.
  const usage = usageReported(result.usage)
    ? result.usage
    : { input_tokens: promptTokens(), output_tokens: counter.count(text) };
  return { context: { ...compactedContext(previous, plan, summary), model: model.id }, usage };
}

/**
 * Runs `call` with the caller's signal, or with one the deadline `timeoutMs` aborts too
 * (lib/models/deadline.ts): past it the call fails with ModelTimeoutError, heeding the abort or not.
 * Aborted (the deadline, the caller), the call's own failure is waited for until the tasks queued
 * meanwhile have run (a model that heeds the abort gives it by then): its model's mark of whether
 * the provider may have run the model (lib/models/provider-reach.ts) carries to the timeout, and
 * a caller's abort fails with it; a call that gives none by then is left to itself.
 */
async function withDeadline<T>(
  options: Pick<SummarizeOptions, 'signal' | 'timeoutMs'>,
  call: (signal: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  const { signal, timeoutMs } = options;
  if (timeoutMs === undefined) return call(signal);
  const deadline = startDeadline(signal, timeoutMs);
  // Async, so a call that throws at once still fails through the deadline's clean-up.
  const made = (async () => call(deadline.signal))();
  try {
    return await untilAborted(made, deadline.signal);
  } catch (error) {
    if (!deadline.signal.aborted) throw error;
    const own = await ownFailure(made);
    if (!deadline.timedOut) throw own ?? error;
    const timeout = new ModelTimeoutError(`the summary model did not answer within ${timeoutMs} ms`, {
      timeout_ms: timeoutMs,
    });
    throw own !== undefined && providerUnreached(own) ? markReach(timeout, false) : timeout;
  } finally {
    deadline.dispose();
  }
}

/** What `call` failed with, if it failed before a task queued now runs; undefined if not (yet). */
async function ownFailure(call: Promise<unknown>): Promise<unknown> {
  let next!: () => void;
  const queued = new Promise<undefined>((resolve) => (next = () => resolve(undefined)));
  const timer = setTimeout(next, 0);
  try {
    return await Promise.race([
      call.then(
        () => undefined,
        (error: unknown) => error,
      ),
      queued,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The context start a compaction along `plan` moves to, with `summary` for what it cuts off. */
export function compactedContext(
  previous: ContextStart | null,
  plan: CompactionPlan,
  summary: string,
): Omit<NewContext, 'model'> {
  return {
    start_seq: plan.startSeq,
    summary,
    summarized: {
      first_seq: previous ? Math.min(previous.summarized.first_seq, plan.firstSeq) : plan.firstSeq,
      last_seq: plan.lastSeq,
    },
    interrupted: [...new Set(plan.interrupted.map((call) => call.call_id))],
  };
}
