/**
 * What the Worker bundle gets instead of `@ai-sdk/gateway` (wrangler.toml `[alias]`). The AI
 * SDK imports the Vercel AI Gateway as its default provider, used only for string model ids;
 * tailgate always hands it a provider's model (lib/models/), so the gateway never runs and
 * its ~140 KiB stay out of the bundle. Node and Deno load the real package.
 */
class NoGatewayError extends Error {
  /** No gateway runs, so no error comes from one. */
  static isInstance(_error: unknown): boolean {
    return false;
  }
}

export class GatewayError extends NoGatewayError {}
export class GatewayAuthenticationError extends NoGatewayError {}

function unavailable(): never {
  throw new Error('the AI Gateway is not part of the tailgate Worker: pass a provider model, not a model id string');
}

/** The default provider of the AI SDK: every use throws. */
export const gateway: unknown = new Proxy(unavailable, { get: () => unavailable, apply: () => unavailable() });

export function createGateway(): never {
  return unavailable();
}
