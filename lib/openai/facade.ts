import type { ServiceConfig } from '../config.ts';
import type { Inbox } from '../inbox/index.ts';
import type { Item } from '../items.ts';
import type { SessionLog } from '../session/session-log.ts';
import type { ObjectStore } from '../store/object-store.ts';
import type { TurnServices } from '../turn/index.ts';
import { facadeModelId } from './models.ts';

/**
 * What the OpenAI-compatible API's handlers work with: one request's services and config, and
 * what the HTTP layer decides about its caller (functions/routes/openai/facade-context.ts
 * builds it from a request).
 */
export interface Facade {
  services: TurnServices & { sessions: SessionLog; inbox: Inbox; store: ObjectStore; clock: () => Date };
  config: ServiceConfig;
  /**
   * Tells callers apart where their requests may otherwise be the same (the history index,
   * lib/openai/history-index.ts): a budgeted token's id; absent or '' for the others.
   */
  caller?: string;
  /**
   * 403 unless the caller's token may act on `sessionId` (null: a new session, or none);
   * `header`: the request header that would have named the session, for the refusal to name.
   */
  authorize(sessionId: string | null, header?: string): void;
  /** 413 for an item over MAX_ITEM_BYTES, named by its place (`positions`) in the request's field `name`. */
  checkItems(items: readonly Item[], name: 'input' | 'items' | 'messages', positions: readonly number[]): void;
  /** The OpenAI-shaped error body of a thrown value (for an error sent inside a stream). */
  errorBody(error: unknown): unknown;
  /**
   * The request's signal: it aborts when the client goes away (on Workers under the
   * `enable_request_signal` compatibility flag, which wrangler.toml sets), which stops a call that
   * stores nothing (./stateless.ts).
   */
  signal?: AbortSignal;
  /** Counts a turn of `sessionId`, found by the history a request resends, under its rate limit (429). */
  takeSessionTurn?: ((sessionId: string) => Promise<void>) | undefined;
}

/**
 * What the history index's writes use of a facade (lib/openai/history-index.ts): no request's
 * access, so a background turn's runner, which has none, writes them too.
 */
export type IndexFacade = Pick<Facade, 'services' | 'config' | 'caller'>;

/** The tailgate model id a request's `model` names (404 model_not_found otherwise). */
export function modelOf(facade: Facade, name: string): string {
  return facadeModelId(facade.config, facade.services.model, name);
}
