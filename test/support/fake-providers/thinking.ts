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
