import type { ModelMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import type { ContentPart } from '../../lib/content.ts';
import type { PromptItem } from '../../lib/items.ts';
import { makesBlock } from '../../lib/models/cache-breakpoints.ts';
import { convertToModelMessages } from '../../lib/models/convert-to-model-messages.ts';
import { resolveModel } from '../../lib/models/resolve-model.ts';
import { type FakeProvider, fixture, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';

/** A tiny seeded generator (mulberry32), so a failing sequence is found again. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const image = (n: number): ContentPart => ({
  type: 'input_image',
  blob: String(n % 10).repeat(64),
  media_type: 'image/png',
  bytes: 3,
  width: 4,
  height: 4,
  data: new Uint8Array([1, 2, n % 256]),
});
const reasoning = [{ type: 'reasoning' as const, summary: [{ type: 'summary_text' as const, text: 'think' }] }];

function randomPrompt(next: () => number, length: number): PromptItem[] {
  const ids = ['a', 'b', 'c', 'd'];
  const pick = <T>(values: readonly T[]) => values[Math.floor(next() * values.length)]!;
  const items: PromptItem[] = [];
  // The calls not answered yet: an output answers one of them (or none: an orphan), once.
  const open: string[] = [];
  for (let seq = 1; seq <= length; seq++) {
    const kind = next();
    if (kind < 0.1) items.push({ type: 'message', role: 'user', content: pick(['go', ' ', 'look']), seq });
    else if (kind < 0.15) items.push({ type: 'message', role: 'system', content: 'notice', seq });
    else if (kind < 0.25)
      items.push({
        type: 'message',
        role: 'assistant',
        content: pick(['done', '', ' ']),
        seq,
        ...(next() < 0.5 ? { reasoning } : {}),
      } as PromptItem);
    else if (kind < 0.55 && open.length < ids.length) {
      // A call_id comes again once its call is answered.
      const callId = pick(ids.filter((id) => !open.includes(id)));
      open.push(callId);
      items.push({
        type: 'function_call',
        call_id: callId,
        name: 'shot',
        arguments: '{}',
        seq,
        ...(next() < 0.3 ? { reasoning } : {}),
      } as PromptItem);
    } else if (kind >= 0.55) {
      const callId = open.length > 0 && next() < 0.9 ? open.splice(Math.floor(next() * open.length), 1)[0]! : 'z';
      items.push({
        type: 'function_call_output',
        call_id: callId,
        output: next() < 0.6 ? [{ type: 'input_text', text: 'ok' }, image(seq)] : 'ok',
        seq,
      });
    }
  }
  return items;
}

/**
 * The Chat Completions rules on a message list: an assistant message's tool calls are each
 * answered by a tool message right after it (tool messages only), and a tool message answers
 * a call of the assistant message before its run.
 */
function chatOrderProblems(messages: ModelMessage[]): string[] {
  const problems: string[] = [];
  let open: Set<string> | undefined;
  let answered = new Set<string>();
  messages.forEach((message, index) => {
    if (message.role === 'tool') {
      if (!open) problems.push(`tool message ${index} follows no tool calls`);
      for (const part of message.content) {
        if (part.type !== 'tool-result') continue;
        if (!open?.has(part.toolCallId))
          problems.push(`tool result ${part.toolCallId} at ${index} answers no open call`);
        if (answered.has(part.toolCallId)) problems.push(`tool result ${part.toolCallId} at ${index} twice`);
        answered.add(part.toolCallId);
      }
      return;
    }
    if (open) {
      for (const id of open) if (!answered.has(id)) problems.push(`call ${id} unanswered before message ${index}`);
    }
    open = undefined;
    answered = new Set();
    if (message.role === 'assistant' && typeof message.content !== 'string') {
      const calls = message.content.filter((part) => part.type === 'tool-call').map((part) => part.toolCallId);
      if (calls.length > 0) open = new Set(calls);
    }
  });
  if (open) for (const id of open) if (!answered.has(id)) problems.push('call unanswered at the end');
  return problems;
}

describe('tool results with images on Chat Completions, any order of items', () => {
  it('keeps every tool message right after its calls, the images after them, in 1,000 random prompts', () => {
    for (let seed = 1; seed <= 1000; seed++) {
      const next = random(seed);
      const prompt = randomPrompt(next, 2 + Math.floor(next() * 14));
      const after = convertToModelMessages(prompt, { toolResultMedia: 'after', fileUrls: false });
      const problems = chatOrderProblems(after);
      if (problems.length > 0) {
        throw new Error(`seed ${seed}: ${problems.join('; ')}\n${JSON.stringify(prompt)}\n${JSON.stringify(after)}`);
      }
      // The same message roles as with no media in tool results, but for the user messages of images.
      const plain = convertToModelMessages(prompt, { toolResultMedia: false, fileUrls: false });
      const roles = (messages: ModelMessage[]) =>
        messages
          .filter(
            (message) =>
              !(
                message.role === 'user' &&
                typeof message.content !== 'string' &&
                message.content[0]?.type === 'text' &&
                / of tool call /.test(message.content[0].text) &&
                !message.content[0].text.startsWith('Output')
              ),
          )
          .map((message) => message.role);
      expect(roles(after), `seed ${seed}`).toEqual(roles(plain));
      // Every image of a tool result is sent once.
      const images = (messages: ModelMessage[]) =>
        messages.flatMap((message) =>
          typeof message.content === 'string'
            ? []
            : message.content.flatMap((part: any) =>
                part.type === 'file'
                  ? [1]
                  : part.type === 'tool-result' && part.output.type === 'content'
                    ? part.output.value.filter((value: any) => value.type === 'file')
                    : [],
              ),
        ).length;
      expect(images(after), `seed ${seed}`).toBe(images(convertToModelMessages(prompt, { toolResultMedia: true })));
    }
  });

  it("sends a prompt as the start of the next turn's, where that goes on with the answer to it", () => {
    const withoutReasoning = (messages: ModelMessage[]) =>
      messages.map((message) =>
        message.role === 'assistant' && typeof message.content !== 'string'
          ? { ...message, content: message.content.filter((part) => part.type !== 'reasoning') }
          : message,
      );
    for (let seed = 1; seed <= 1000; seed++) {
      const next = random(seed);
      const prompt = randomPrompt(next, 2 + Math.floor(next() * 14));
      const full = withoutReasoning(convertToModelMessages(prompt, { toolResultMedia: 'after', fileUrls: false }));
      prompt.forEach((item, index) => {
        const answer = item.type === 'function_call' || (item.type === 'message' && item.role === 'assistant');
        const before = prompt[index - 1];
        // A turn's prompt ends with its input (a blank message is sent as nothing).
        const answered =
          !before || before.type === 'function_call' || (before.type === 'message' && before.role === 'assistant');
        if (!answer || answered) return;
        if (!makesBlock(before) || !makesBlock(item)) return;
        const turn = withoutReasoning(
          convertToModelMessages(prompt.slice(0, index), { toolResultMedia: 'after', fileUrls: false }),
        );
        expect(full.slice(0, turn.length), `seed ${seed} cut ${index}`).toEqual(turn);
      });
    }
  });

  let provider: FakeProvider | undefined;
  afterEach(async () => {
    await provider?.close();
    provider = undefined;
  });

  it('sends Chat Completions a valid order of messages on the wire, for 60 random prompts', async () => {
    provider = await startFakeProvider(() => ({ text: fixture('openai-chat-text.json') }));
    const model = resolveModel('openai-compatible:test-model', {
      OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
      MODEL_MAX_RETRIES: '0',
    });
    // What the prompts had on the wire, so that they are known to hold tool runs with images.
    const seen = { tool: 0, images: 0 };
    for (let seed = 1; seed <= 60; seed++) {
      const next = random(seed);
      const prompt = randomPrompt(next, 4 + Math.floor(next() * 12));
      await model.generate({ prompt, tools: [], maxOutputTokens: 16 });
      const wire: any[] = (provider.requests.at(-1)!.body as { messages: any[] }).messages;
      const problems: string[] = [];
      let open = new Set<string>();
      wire.forEach((message, index) => {
        if (message.role === 'tool') {
          if (!open.delete(message.tool_call_id)) problems.push(`tool message ${index} answers no open call`);
          return;
        }
        if (open.size > 0) problems.push(`message ${index} (${message.role}) comes before every call is answered`);
        open = new Set((message.tool_calls ?? []).map((call: { id: string }) => call.id));
      });
      if (open.size > 0) problems.push('calls left unanswered at the end');
      seen.tool += wire.filter((message) => message.role === 'tool').length;
      seen.images += wire.filter(
        (message) =>
          message.role === 'user' && Array.isArray(message.content) && / of tool call /.test(message.content[0]?.text),
      ).length;
      expect(problems, `seed ${seed}: ${JSON.stringify(wire.map((message) => message.role))}`).toEqual([]);
    }
    expect(seen.tool).toBeGreaterThan(60);
    expect(seen.images).toBeGreaterThan(20);
  });
});
