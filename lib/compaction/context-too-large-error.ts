import { TailgateError } from '../errors.ts';

/**
 * The prompt exceeds the model's window even after every strategy and compaction (one
 * enormous item, say): the turn is refused instead of sending a request that must fail.
 * `details` names the largest item (its seq, or its index in the prompt when synthetic).
 */
export class ContextTooLargeError extends TailgateError {
  constructor(details: {
    prompt_tokens: number;
    prompt_limit: number;
    context_limit: number;
    response_reserve: number;
    item: { index: number; seq: number | null; tokens: number };
  }) {
    const which = details.item.seq !== null ? `item seq ${details.item.seq}` : `prompt item ${details.item.index}`;
    super(
      'context_too_large',
      `the prompt needs ${details.prompt_tokens} tokens, more than the ${details.prompt_limit} the model can take ` +
        `(context_limit ${details.context_limit} - response_reserve ${details.response_reserve}); the largest is ` +
        `${which} (${details.item.tokens} tokens)`,
      details,
    );
    this.name = 'ContextTooLargeError';
  }
}
