import { fixture } from './fake-provider-server.ts';

/** One request a recording fetch saw. */
export interface Sent {
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

/**
 * A fetch that notes each request and answers it with recorded fixture `name`: `<name>.sse` for
 * a streamed request, `<name>.json` otherwise (for comparing an adapter with the SDK's factory).
 */
export function recordingFetch(name: string): { fetch: typeof globalThis.fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit) => {
    const body = JSON.parse(String(init?.body)) as { stream?: boolean };
    sent.push({ url: String(input), headers: Object.fromEntries(new Headers(init?.headers)), body });
    return body.stream
      ? new Response(fixture(`${name}.sse`), { headers: { 'content-type': 'text/event-stream' } })
      : new Response(fixture(`${name}.json`), { headers: { 'content-type': 'application/json' } });
  };
  return { fetch, sent };
}
