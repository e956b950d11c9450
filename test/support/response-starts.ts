import type OpenAI from 'openai';

/** Where a request goes on from a response: its id, its conversation, or its history sent again. */
export type ResponseStart = 'previous_response_id' | 'conversation' | 'history';

/**
 * The request that sends `input` on from `first` (a response in a conversation, after the user
 * message `said`) as `start` says: under `previous_response_id`, under its conversation, or with
 * the history up to it sent again.
 */
export function goingOnFrom(
  first: OpenAI.Responses.Response,
  start: ResponseStart,
  said: string,
): (input: string) => OpenAI.Responses.ResponseCreateParamsNonStreaming {
  const history = [{ role: 'user' as const, content: said }, ...(first.output as OpenAI.Responses.ResponseInputItem[])];
  return (input) =>
    start === 'previous_response_id'
      ? { input, previous_response_id: first.id }
      : start === 'conversation'
        ? { input, conversation: first.conversation!.id }
        : { input: [...history, { role: 'user', content: input }] };
}
