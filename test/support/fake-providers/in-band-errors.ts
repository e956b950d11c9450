import { fixture } from './fake-provider-server.ts';

/** The first `count` events of a recorded stream (test/support/fake-providers/fixtures/). */
export const firstEvents = (name: string, count: number) =>
  `${fixture(name).split('\n\n').slice(0, count).join('\n\n')}\n\n`;

/** Anthropic's failure inside a Messages stream it began: `event: error`, overloaded. */
export const anthropicOverloaded = `event: error\ndata: ${JSON.stringify({
  type: 'error',
  error: { type: 'overloaded_error', message: 'Overloaded' },
})}\n\n`;

/** OpenAI's failure inside a Chat Completions stream it began: a chunk holding `error`. */
export const chatServerError = `data: ${JSON.stringify({
  error: {
    message: 'The server had an error while processing your request.',
    type: 'server_error',
    param: null,
    code: null,
  },
})}\n\n`;
