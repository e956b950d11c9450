import type { PromptItem, Tool } from '../../../lib/items.ts';

/** The tool the provider adapter tests offer. */
export const weatherTool: Tool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a place',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
};

/** A prompt with one answered call, using the provider's own style of call id. */
export function toolLoopPrompt(callId: string): PromptItem[] {
  return [
    { type: 'message', role: 'system', content: 'You are terse.' },
    { type: 'message', role: 'user', content: 'Weather in Paris?' },
    { type: 'message', role: 'assistant', content: 'Let me look.' },
    { type: 'function_call', call_id: callId, name: 'get_weather', arguments: '{"location":"Paris"}' },
    { type: 'function_call_output', call_id: callId, output: '18C, sunny' },
    { type: 'message', role: 'user', content: 'And tomorrow?' },
  ];
}
