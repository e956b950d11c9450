import type { RecordedRequest } from './fake-provider-server.ts';

/** The thinking of the recorded answers anthropic-message-thinking-tool-use.{json,sse}. */
export const recordedThinking = {
  thinking: 'The user wants the weather in Paris. I should call get_weather with location Paris.',
  signature:
    'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds3Ns0T1nO/WuBFGAS0ctnwtiEVkTZMhKSiXoQ' +
    'BDrK5xL2gD5M0Qo4PYhCtx5Bd1GJnX9N8pY03x',
  /** The data of the JSON answer's redacted_thinking block. */
  redacted: 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmN3kJ8',
  /** The call of both answers. */
  callId: 'toolu_01NbC7Pf1cLh2zRtyRyFoMuP',
} as const;

/** The tool the recorded answers call, as a Responses request offers it. */
export const recordedTool = {
  type: 'function' as const,
  name: 'get_weather',
  strict: false,
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};

/** A call with thinking on whose last message holds no tool_result: answered with thinking and a call. */
export function thinksToCall(request: RecordedRequest): boolean {
  const last = (request.body?.messages as { content: unknown }[] | undefined)?.at(-1)?.content;
  const results = Array.isArray(last) && last.some((block: { type: string }) => block.type === 'tool_result');
  return request.body?.thinking !== undefined && !results;
}
