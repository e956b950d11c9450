/** What tests read from an Anthropic Messages request body as the fake provider received it. */

/** Every image block of a Messages request body, in tool results too, in order. */
export function imageBlocks(body: any): any[] {
  const blocks: any[] = body.messages.flatMap((message: any) =>
    Array.isArray(message.content) ? message.content : [],
  );
  return blocks.flatMap((block) =>
    block.type === 'image'
      ? [block]
      : block.type === 'tool_result' && Array.isArray(block.content)
        ? block.content.filter((inner: any) => inner.type === 'image')
        : [],
  );
}

/** A request body's messages without their cache breakpoints (placed on the last blocks of each request). */
export function withoutBreakpoints(body: any): unknown[] {
  return JSON.parse(JSON.stringify(body.messages, (key, value) => (key === 'cache_control' ? undefined : value)));
}
