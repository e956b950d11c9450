import { describe, expect, it } from 'vitest';
import type { PromptItem } from '../../lib/items.ts';
import { convertToModelMessages, MISSING_OUTPUT_TEXT } from '../../lib/models/convert-to-model-messages.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { previewPrompt, runTurn, type TurnRequest } from '../../lib/turn/index.ts';
import { recordingEcho, turnWorld } from '../support/turn-world.ts';

/**
 * A call the client leaves open for turns (docs/API.md, "A call may stay open for turns"): it
 * stays in the prompt where it stands, answered by a placeholder, and its output, once it comes
 * after other items, goes as user text; so each turn's prompt, and the provider messages made
 * from it, begin with the one the turn before sent.
 */

/** What a provider is sent of a prompt: its messages, without the stored items' timestamps. */
function messagesOf(prompt: PromptItem[]): string[] {
  return convertToModelMessages(prompt).map((message) => JSON.stringify(message));
}

describe('a call left open for turns', () => {
  it.each([[['none']], [null], [['shorten_tools', 'inbox']]])(
    'stays where it stands with a placeholder result, every prompt beginning with the one before (%j)',
    async (strategies) => {
      const model = recordingEcho();
      const { sessions, services } = turnWorld(new MemoryStore(), model);
      await sessions.create({ id: 's', strategies, tools: [{ type: 'function', name: 'f' }] });
      const first = await runTurn(services, 's', { input: 'call f {}' });
      const call = first.output[0]!;
      if (call.type !== 'function_call') throw new Error('the echo model made no call');
      const inputs: TurnRequest['input'][] = [
        'never mind',
        'and again',
        [{ type: 'function_call_output', call_id: call.call_id, output: 'late' }],
        'after',
      ];
      for (const input of inputs) {
        const preview = await previewPrompt(services, 's', {});
        await runTurn(services, 's', { input });
        // The preview shows the prompt the turn sent, but for its input.
        const sent = model.prompts.at(-1)!;
        expect(sent.slice(0, preview.items.length)).toEqual(preview.items);
      }
      const prompts = model.prompts;
      for (let turn = 1; turn < prompts.length; turn += 1) {
        const before = prompts[turn - 1]!;
        const after = prompts[turn]!;
        expect(after.slice(0, before.length)).toEqual(before);
        const sentBefore = messagesOf(before);
        // The first prompt ends with the user message that the model answered with the call.
        expect(messagesOf(after).slice(0, sentBefore.length)).toEqual(sentBefore);
      }
      // From the second turn on, the call is sent where it stands, answered by the placeholder.
      for (const prompt of prompts.slice(1)) {
        const messages = convertToModelMessages(prompt);
        const at = messages.findIndex(
          (message) => message.role === 'assistant' && JSON.stringify(message.content).includes(call.call_id),
        );
        expect(at).toBe(1);
        expect(messages[at + 1]).toMatchObject({
          role: 'tool',
          content: [{ toolCallId: call.call_id, output: { type: 'text', value: MISSING_OUTPUT_TEXT } }],
        });
      }
      // The late output goes as user text.
      expect(convertToModelMessages(prompts[3]!).at(-1)).toMatchObject({
        role: 'user',
        content: [{ type: 'text', text: `Output of tool call ${call.call_id}:\nlate` }],
      });
      // The receipts show the call sent whole, and the context counts it as kept.
      for (let turn = 2; turn <= prompts.length; turn += 1) {
        const { receipt, context } = await sessions.getTurn('s', turn);
        const treatment = receipt!.seen.find((run) => run.first_seq <= call.seq! && call.seq! <= run.last_seq);
        expect(treatment?.treatment).toBe('whole');
        expect(context).toMatchObject({ tool_calls_total: 1, kept_full: 1, dropped: 0 });
      }
    },
  );
});
