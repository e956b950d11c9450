import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context, MiddlewareHandler } from 'hono';
import { env as runtimeEnv } from 'hono/adapter';
import { parseServiceConfig } from '../lib/config.ts';
import { serviceConfigOf } from '../lib/config-cache.ts';

export type { AppEnv, RuntimeEnvironment } from './router.ts';
export type { AppOptions } from './app-options.ts';
import { InvalidRequestError, NotFoundError } from '../lib/errors.ts';
import { requireConditionalWrites } from '../lib/store/write-probe.ts';
import { allowedMethods, methodNotAllowed, unconfiguredAnswer } from './allowed-methods.ts';
import { bodyBudget } from './body-budget.ts';
import { bearerAuth, checkRevocation, declaredScopes, revocationCheck, type ScopeTable } from './auth.ts';
import { createServices, type AppServices } from './services.ts';
import { infoToConsole, serviceInputs, type QueuedRun } from './service-inputs.ts';
import type { AppOptions } from './app-options.ts';
import { retryDelaySeconds, runBackgroundTurn, type BackgroundTurn } from '../lib/turn/index.ts';
import { createErrorHandler } from './error-handler.ts';
import { logToConsole } from '../lib/loggable.ts';
import { checkJsonBody, JSON_CONTENT_TYPE } from './request-json.ts';
import { rateLimit, turnLimits, WindowLimiter } from './rate-limit.ts';
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

/**
 * Assembles the HTTP API: one router per resource, one error handler, auth, body limits,
 * and the per-request services (the settings are read on every request, and parsed again when they
 * differ from the last parse: lib/config-cache.ts).
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
      c.set('config', serviceConfigOf(readEnvironment(c)));
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
    rateLimit(turnLimits(options.turnLimiter ?? new WindowLimiter(clock), readEnvironment, log), () =>
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
 * The services of work outside a request (the Workers queue consumer's background turns, the
 * webhook outbox's drainer): the services a request would have, from the environment, with
 * `background` for the work they leave running; `requestId`, the request a queue message came
 * from, names it in the log lines of its turns (and of the inputs their closes take up whose
 * entries name no request); `queued`, a message's turn of a queued input, is named by the
 * request that queued it (BackgroundTurn `enqueued_by`) in its place, and no other turn is.
 */
export function createOutsideServices(
  options: AppOptions,
): (
  environment: RuntimeEnvironment,
  background: (task: Promise<unknown>) => void,
  requestId?: string | null,
  queued?: QueuedRun,
) => AppServices {
  const log = options.log ?? logToConsole;
  const info = options.info ?? infoToConsole;
  return (environment, background, requestId = null, queued = undefined) =>
    createServices({
      ...serviceInputs(options, environment, parseServiceConfig(environment), log, requestId, queued),
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
    const services = servicesFor(environment, background, run.request_id ?? null, run);
    const outcome = await runBackgroundTurn(services, run);
    if (outcome === 'done') return outcome;
    return { retryAfterSeconds: retryDelaySeconds(attempts, services.config.turnLeaseMs) };
  };
}

/**
 * A compressed body (a Content-Encoding other than identity) is refused up front: no runtime
 * decodes it, and its bytes would be answered as not UTF-8. A body with a non-JSON content type
 * is refused too: the validator would otherwise
 * read it as an empty object (`curl -d` without a JSON Content-Type creates a session with
 * defaults instead of the one asked for). An empty body needs no content type (`curl -X POST`
 * of a revoke or a cancel): Node hands such a request a body stream, so its bytes are counted
 * (bodyBudget has bounded them already).
 */
const requireJsonBody: MiddlewareHandler = async (c, next) => {
  if (c.req.method === 'GET' || c.req.method === 'HEAD' || c.req.method === 'DELETE') return next();
  const encoding = c.req.header('content-encoding')?.trim();
  if (encoding && encoding.toLowerCase() !== 'identity')
    throw new InvalidRequestError(
      `the request body must not be compressed (Content-Encoding: ${encoding}): send it without Content-Encoding`,
      { field: 'content-encoding' },
    );
  if (isStreamedImport(c)) return next();
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
