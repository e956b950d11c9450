import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { env as runtimeEnv } from 'hono/adapter';
import { parseServiceConfig, stringEnv, type ServiceConfig } from '../lib/config.ts';

export type { AppEnv, RuntimeEnvironment } from './router.ts';
import { InvalidRequestError, NotFoundError } from '../lib/errors.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { requireConditionalWrites } from '../lib/store/write-probe.ts';
import type { TokenEncoders } from '../lib/tokens/token-counter.ts';
import { resolveModel, type ModelEnvironment } from '../lib/models/resolve-model.ts';
import type { Model } from '../lib/models/model.ts';
import { allowedMethods, methodNotAllowed, unconfiguredAnswer } from './allowed-methods.ts';
import { bodyBudget } from './body-budget.ts';
import {
  bearerAuth,
  checkRevocation,
  declaredScopes,
  revocationCheck,
  type ScopeTable,
  type TokenSetting,
} from './auth.ts';
import { createServices, type AppServices, type ServiceInputs } from './services.ts';
import type { WebhookSink } from '../lib/webhooks/events.ts';
import { outboxSink } from '../lib/webhooks/outbox.ts';
import { retryDelaySeconds, RunningTurns, runBackgroundTurn, type BackgroundTurn } from '../lib/turn/index.ts';
import { createErrorHandler } from './error-handler.ts';
import { logToConsole } from '../lib/loggable.ts';
import { checkJsonBody, JSON_CONTENT_TYPE } from './request-json.ts';
import { rateLimit, turnLimits, WindowLimiter } from './rate-limit.ts';
import type { Metrics } from './metrics.ts';
import { compactionObserver, countedStore, noStorageOps, turnObserver } from './turn-log.ts';
import { tracingFor } from './tracing.ts';
import { requestId } from './request-id.ts';
import { corsForApi } from './cors.ts';
import { createRouter, type AppEnv, type RuntimeEnvironment } from './router.ts';
import { compactRoutes } from './routes/compact.ts';
import { inboxRoutes } from './routes/inbox.ts';
import { blobRoutes } from './routes/blobs.ts';
import { itemRoutes } from './routes/items.ts';
import { promptRoutes } from './routes/prompt.ts';
import { receiptRoutes } from './routes/receipts.ts';
import { eventRoutes } from './routes/events.ts';
import { queueAndForkRoutes } from './routes/queue-forks.ts';
import { serviceRoutes, registerOpenApi } from './routes/service.ts';
import { noMetricsRoute } from './routes/no-metrics.ts';
import { sessionRoutes } from './routes/sessions.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { isStreamedImport, transferRoutes } from './routes/transfer.ts';
import { turnRoutes } from './routes/turns.ts';
import { openaiRoutes } from './routes/openai/index.ts';
import { OPENAI_PATH, openaiNotFound, withOpenAIErrors } from './routes/openai/errors.ts';
import { inspectorRoutes } from './ui/routes.ts';

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
}

/** Routine events when no `info` is given: info level (Workers Logs does not count them as errors). */
function infoToConsole(message: string): void {
  console.info(message);
}

/**
 * Assembles the HTTP API: one router per resource, one error handler, auth, body limits,
 * and the per-request services (config is parsed on every request, never memoized).
 */
export function createApp(options: AppOptions): OpenAPIHono<AppEnv> {
  const readEnvironment = options.readEnvironment ?? ((c: Context) => runtimeEnv(c) as RuntimeEnvironment);
  const log = options.log ?? logToConsole;
  const info = options.info ?? infoToConsole;
  const app = createRouter();
  app.use('*', requestId);
  app.onError((error, c) => {
    // A failure's log message names the request, as its answer's x-request-id does.
    const logged = (message: string, details?: unknown) => log(`${message} (${c.var.requestId})`, details);
    return withOpenAIErrors(createErrorHandler(logged), logged)(error, c);
  });
  app.notFound((c) =>
    OPENAI_PATH.test(c.req.path)
      ? openaiNotFound(c)
      : c.json({ error: { code: 'not_found', message: `no route for ${c.req.method} ${c.req.path}` } }, 404),
  );

  // What the Node and Deno servers check at startup: the settings, and the store they name.
  const checkSettings = (c: Context) => {
    const environment = readEnvironment(c);
    options.store(environment, parseServiceConfig(environment));
  };
  app.route(
    '/',
    serviceRoutes({
      app,
      readEnvironment,
      checkSettings,
      ...(options.docsScript ? { docsScript: options.docsScript } : {}),
    }),
  );
  // The inspector's page and assets are public (no data in them); what they fetch needs a token.
  app.route('/', inspectorRoutes({ script: options.inspectorScript, readEnvironment }));
  // GET /metrics with METRICS_TOKEN (an admin token: the authenticated route below); none on a Worker.
  app.route('/', options.metrics ? options.metrics.tokenRoute(readEnvironment) : noMetricsRoute());

  // A known path asked with a method it does not serve: 405 before auth, with CORS's headers (routes read lazily).
  let served: ((path: string) => string[]) | undefined;
  const servedMethods = () => (served ??= allowedMethods(app.routes));
  const configure: MiddlewareHandler<AppEnv> = async (c, next) => {
    try {
      c.set('config', parseServiceConfig(readEnvironment(c)));
    } catch (error) {
      // Settings that do not parse are a 503, but a path no route serves is its 404, a method none serves its 405.
      return unconfiguredAnswer(c.req.method, c.req.path, servedMethods(), error, () => c.notFound());
    }
    await next();
  };
  app.use('*', configure);
  // Before auth: a browser's preflight carries no token.
  app.use('/v1/*', corsForApi);
  app.use('*', methodNotAllowed(servedMethods));
  // Filled once every route is registered: the scopes their definitions declare.
  let scopes: ScopeTable = new Map();
  const clock = options.clock ?? (() => new Date());
  app.use(
    '*',
    bearerAuth({
      config: (c) => c.get('config'),
      scopes: () => scopes,
      clock,
      ...(options.tokenSetting ? { tokenSetting: options.tokenSetting } : {}),
    }),
  );
  // An import is streamed line by line, each line limited (functions/routes/transfer.ts).
  const setting = options.tokenSetting ?? 'server';
  app.use('*', async (c, next) => (isStreamedImport(c) ? next() : bodyBudget(c, next, setting)));
  app.use('*', requireJsonBody);
  app.use('*', async (c, next) => (isStreamedImport(c) ? next() : checkJsonBody(c, next)));
  app.use('*', async (c, next) => {
    const environment = readEnvironment(c);
    const config = c.get('config');
    // A failure the request's work logs (its turns', and those of the work left after its
    // response) names the request, as the error handler's does.
    const requestLog = (message: string, details?: unknown) => log(`${message} (${c.var.requestId})`, details);
    const inputs = serviceInputs(options, environment, config, requestLog, c.var.requestId);
    // The session API needs conditional writes; the first request of the process checks them.
    if (c.req.path.startsWith('/v1/')) await requireConditionalWrites(inputs.store, { keyPrefix: config.keyPrefix });
    c.set(
      'services',
      createServices({
        ...inputs,
        background: backgroundRunner(c, requestLog, info, options.afterResponse),
        checkSessionConfig: revocationCheck(c.var.principal),
        tokenBudget: c.var.principal.budget,
      }),
    );
    await next();
  });
  // After the services: a session's limit checks a bound token's revocation before it counts.
  app.use(
    '*',
    rateLimit(turnLimits(new WindowLimiter(clock), readEnvironment), () =>
      options.metrics?.count('tailgate_turn_errors_total', { code: 'rate_limited' }),
    ),
  );
  app.use('*', checkRevocation);

  app.route('/', transferRoutes());
  app.route('/', sessionRoutes());
  app.route('/', turnRoutes());
  app.route('/', itemRoutes());
  app.route('/', blobRoutes());
  app.route('/', inboxRoutes());
  app.route('/', promptRoutes());
  app.route('/', compactRoutes());
  app.route('/', receiptRoutes());
  app.route('/', eventRoutes());
  app.route('/', queueAndForkRoutes());
  app.route('/', tokenRoutes(clock));
  app.route('/', openaiRoutes());
  if (options.metrics) app.route('/', options.metrics.routes());
  registerOpenApi(app);
  scopes = declaredScopes(app);
  return app;
}

/**
 * The turn attempts running under an app's options (lib/turn/running.ts): one registry per
 * options object, which a runtime entry builds once for its process (or isolate) and hands to
 * createApp and createOutsideServices alike, so a close written by a request stops at once a
 * turn that a request or a queue consumer of the same process runs. Apps built from distinct
 * options (tests' simulated processes over one store) share none: there a close is found at
 * the turn's next lease renewal, as across processes.
 */
const runningTurns = new WeakMap<AppOptions, RunningTurns>();

function runningUnder(options: AppOptions): RunningTurns {
  let running = runningTurns.get(options);
  if (!running) {
    running = new RunningTurns();
    runningTurns.set(options, running);
  }
  return running;
}

/** What a request's services and a background runner's share, from the runtime environment. */
function serviceInputs(
  options: AppOptions,
  environment: RuntimeEnvironment,
  config: ServiceConfig,
  log: (message: string, details?: unknown) => void,
  requestId: string | null,
): Omit<ServiceInputs, 'background'> {
  const strings = stringEnv(environment);
  const modelEnvironment: ModelEnvironment = {
    ...strings,
    MODEL_TIMEOUT_MS: config.modelTimeoutMs,
    MODEL_MAX_RETRIES: config.modelMaxRetries,
    ...(environment.AI ? { AI: environment.AI as ModelEnvironment['AI'] } : {}),
    ...options.modelEnvironment,
  };
  const logLine = options.logLine ?? ((line: string) => console.log(line));
  const backend = options.store(environment, config);
  // The storage operations of this request (or queue message), for its turns' log lines; a turn
  // it runs in process after its response (a background or queued one) counts its own.
  const counted = (): Pick<ServiceInputs, 'store' | 'webhookSink' | 'observeTurn'> => {
    const ops = noStorageOps();
    const store = countedStore(backend, ops, options.metrics);
    return {
      store,
      webhookSink: config.webhooks
        ? (options.queueWebhook?.(environment) ?? outboxSink(store, config.keyPrefix, options.webhookStored))
        : undefined,
      observeTurn: turnObserver({ logLine, metrics: options.metrics, ops, logContent: config.logContent, requestId }),
    };
  };
  return {
    ...counted(),
    countedApart: counted,
    observeCompaction: options.metrics ? compactionObserver(options.metrics) : undefined,
    tracing: tracingFor(config.tracing),
    config,
    env: strings,
    model: (id) => (options.wrapModel ?? ((model: Model) => model))(resolveModel(id, modelEnvironment)),
    log,
    info: options.info ?? infoToConsole,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.tokenEncoders ? { tokenEncoders: options.tokenEncoders } : {}),
    startBackground: options.queueTurn?.(environment, requestId),
    running: runningUnder(options),
  };
}

/**
 * The services of work outside a request (the Workers queue consumer's background turns, the
 * webhook outbox's drainer): the services a request would have, from the environment, with
 * `background` for the work they leave running; `requestId`, the request a queue message came
 * from, names it in the log lines of its turns (and of the inputs their closes take up).
 */
export function createOutsideServices(
  options: AppOptions,
): (
  environment: RuntimeEnvironment,
  background: (task: Promise<unknown>) => void,
  requestId?: string | null,
) => AppServices {
  const log = options.log ?? logToConsole;
  const info = options.info ?? infoToConsole;
  return (environment, background, requestId = null) =>
    createServices({
      ...serviceInputs(options, environment, parseServiceConfig(environment), log, requestId),
      background: (task) => background(task.catch((error: unknown) => logBackgroundFailure(log, info, error))),
    });
}

/**
 * Runs a background turn outside a request (the Workers queue consumer), with the services
 * of createOutsideServices, on its `attempts`-th delivery: `retryAfterSeconds` asks the queue
 * to deliver the turn again after that delay (see runBackgroundTurn and retryDelaySeconds).
 */
export function createTurnRunner(
  options: AppOptions,
): (
  run: BackgroundTurn,
  environment: RuntimeEnvironment,
  background: (task: Promise<unknown>) => void,
  attempts?: number,
) => Promise<'done' | { retryAfterSeconds: number }> {
  const servicesFor = createOutsideServices(options);
  return async (run, environment, background, attempts = 1) => {
    const services = servicesFor(environment, background, run.request_id ?? null);
    const outcome = await runBackgroundTurn(services, run);
    if (outcome === 'done') return outcome;
    return { retryAfterSeconds: retryDelaySeconds(attempts, services.config.turnLeaseMs) };
  };
}

/**
 * A body with a non-JSON content type is refused up front: the validator would otherwise
 * read it as an empty object (`curl -d` without a JSON Content-Type creates a session with
 * defaults instead of the one asked for). An empty body needs no content type (`curl -X POST`
 * of a revoke or a cancel): Node hands such a request a body stream, so its bytes are counted
 * (bodyBudget has bounded them already).
 */
const requireJsonBody: MiddlewareHandler = async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.req.method === 'DELETE' || isStreamedImport(c))
    return next();
  const contentType = c.req.header('content-type');
  if (contentType !== undefined && JSON_CONTENT_TYPE.test(contentType)) return next();
  if (contentType === undefined && (await c.req.arrayBuffer()).byteLength === 0) return next();
  throw new InvalidRequestError('the request body must be JSON: send Content-Type: application/json', {
    field: 'content-type',
  });
};

/**
 * How work after a response that threw is logged: a session deleted meanwhile (a pack, an index
 * refresh or a pickup of its queue finding it gone) is one routine line, as a turn it stopped is;
 * anything else is a failure, with its error.
 */
function logBackgroundFailure(
  log: (message: string, details?: unknown) => void,
  info: (message: string) => void,
  error: unknown,
): void {
  if (error instanceof NotFoundError) info(`tailgate: a background task stopped: ${error.message}`);
  else log('tailgate: background task failed', error);
}

/** Runs work after the response: waitUntil on Workers, else told to `tracked` (the server's). */
function backgroundRunner(
  c: Context,
  log: (message: string, details?: unknown) => void,
  info: (message: string) => void,
  tracked: ((task: Promise<unknown>) => void) | undefined,
): (task: Promise<unknown>) => void {
  let waitUntil: ((promise: Promise<unknown>) => void) | undefined;
  try {
    const context = c.executionCtx;
    waitUntil = context.waitUntil.bind(context);
  } catch {
    waitUntil = tracked;
  }
  return (task) => {
    const guarded = task.catch((error: unknown) => logBackgroundFailure(log, info, error));
    waitUntil?.(guarded);
  };
}
