import type { Context } from 'hono';
import type { ServiceConfig } from '../lib/config.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import type { TokenEncoders } from '../lib/tokens/token-counter.ts';
import type { ModelEnvironment } from '../lib/models/resolve-model.ts';
import type { Model } from '../lib/models/model.ts';
import type { WebhookSink } from '../lib/webhooks/events.ts';
import type { BackgroundTurn } from '../lib/turn/index.ts';
import type { TokenSetting } from './auth.ts';
import type { Metrics } from './metrics.ts';
import type { WindowLimiter } from './rate-limit.ts';
import type { RuntimeEnvironment } from './router.ts';

/** What a runtime entry builds its app from (functions/app.ts `createApp`), and its work outside requests. */
export interface AppOptions {
  /** The object store for a request: the R2 binding on Workers, S3 on Deno and Node. */
  store: (environment: RuntimeEnvironment, config: ServiceConfig) => ObjectStore;
  /** Reads the runtime environment; default hono's `env(c)` (c.env, process.env, Deno.env). */
  readEnvironment?: (c: Context) => RuntimeEnvironment;
  /** Extra model settings, e.g. a `fetch` for tests; merged over the environment. */
  modelEnvironment?: Partial<ModelEnvironment>;
  /** Wraps each model a request resolves (the benchmark's worker measures the prompt handed to it). */
  wrapModel?: (model: Model) => Model;
  clock?: () => Date;
  /** Where failures go (default: console.error). */
  log?: (message: string, details?: unknown) => void;
  /** Where routine events go, one line each (default: console.info): TurnServices.info. */
  info?: (message: string) => void;
  /** Real tokenizers (Node and Deno entries); the Workers entry leaves them out (bundle size). */
  tokenEncoders?: TokenEncoders;
  /** The /docs page's script (Node and Deno entries); Workers serve it as a static asset. */
  docsScript?: () => Promise<Uint8Array<ArrayBuffer>>;
  /** The inspector's script, .assets/ui/app.js (Node and Deno entries); Workers serve it as a static asset. */
  inspectorScript?: () => Promise<Uint8Array<ArrayBuffer>>;
  /**
   * The process's metrics, served at GET /metrics by the routes they bring (Node and Deno);
   * Workers keep none, and their bundle leaves the routes out.
   */
  metrics?: Metrics;
  /** Where each turn's JSON log line goes (default: stdout). */
  logLine?: (line: string) => void;
  /**
   * Where a deployment sets its token, for the 503 of one without (functions/auth.ts): `workers`
   * names `wrangler secret put`; the default, `server`, the environment and --allow-anonymous.
   * So too where it sets MAX_BODY_BYTES, for a 413's message (functions/body-budget.ts).
   */
  tokenSetting?: TokenSetting;
  /**
   * Where background turns go (the Workers queue), sent by the request `requestId` names (null
   * outside a request); without it, the process runs them.
   */
  queueTurn?: (
    environment: RuntimeEnvironment,
    requestId: string | null,
  ) => ((run: BackgroundTurn) => Promise<void>) | undefined;
  /**
   * Told of each background turn this process runs because `queueTurn` gave no queue (Workers:
   * an error, the TURNS binding missing).
   */
  inProcessTurn?: (run: BackgroundTurn) => void;
  /** Where webhook events go (the Workers queue); without it, the store's outbox. */
  queueWebhook?: (environment: RuntimeEnvironment) => WebhookSink | undefined;
  /** Told when an event was stored in the outbox (Node and Deno: wakes the delivery loop). */
  webhookStored?: () => void;
  /**
   * Told of the work a request leaves running after its response where there is no
   * `waitUntil` (Node and Deno: a background turn, a charge, a pack), so the server waits for
   * it at shutdown (functions/local-server.ts).
   */
  afterResponse?: (task: Promise<unknown>) => void;
  /** The in-process turn limiter (functions/rate-limit.ts); default a new one on `clock` (tests look into it). */
  turnLimiter?: WindowLimiter;
}
