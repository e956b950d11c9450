import { stringEnv, type ServiceConfig } from '../lib/config.ts';
import { resolveModel, type ModelEnvironment } from '../lib/models/resolve-model.ts';
import type { Model } from '../lib/models/model.ts';
import { outboxSink } from '../lib/webhooks/outbox.ts';
import { RunningTurns, type BackgroundTurn } from '../lib/turn/index.ts';
import type { AppOptions } from './app-options.ts';
import type { RuntimeEnvironment } from './router.ts';
import type { ServiceInputs } from './services.ts';
import { compactionObserver, countedStore, noStorageOps, turnObserver } from './turn-log.ts';
import { tracingFor } from './tracing.ts';

/** Routine events when no `info` is given: info level (Workers Logs does not count them as errors). */
export function infoToConsole(message: string): void {
  console.info(message);
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

/** A queued input's turn (BackgroundTurn `enqueued_by`: the request that queued it), which its log line is named by. */
export type QueuedRun = Pick<BackgroundTurn, 'session_id' | 'turn' | 'enqueued_by'>;

/** What a request's services and a background runner's share, from the runtime environment. */
export function serviceInputs(
  options: AppOptions,
  environment: RuntimeEnvironment,
  config: ServiceConfig,
  log: (message: string, details?: unknown) => void,
  requestId: string | null,
  queued?: QueuedRun,
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
  // it runs in process after its response (a background or queued one) counts its own. A queued
  // input's turn (`queued`, naming the request that queued it) is named by that request, and this
  // one, whose pickup ran it, apart; any other turn these services tell of (a lapsed lease they
  // close) is named by this request alone.
  const counted = (run: QueuedRun | undefined): Pick<ServiceInputs, 'store' | 'webhookSink' | 'observeTurn'> => {
    const ops = noStorageOps();
    const store = countedStore(backend, ops, options.metrics);
    const named = { logLine, metrics: options.metrics, ops, logContent: config.logContent };
    const observe = turnObserver({ ...named, requestId });
    const by = run?.enqueued_by;
    const own = by === undefined ? undefined : turnObserver({ ...named, requestId: by, pickupRequestId: requestId });
    return {
      store,
      webhookSink: config.webhooks
        ? (options.queueWebhook?.(environment) ?? outboxSink(store, config.keyPrefix, options.webhookStored))
        : undefined,
      observeTurn: (outcome) =>
        (own && outcome.session_id === run!.session_id && outcome.turn === run!.turn ? own : observe)(outcome),
    };
  };
  return {
    ...counted(queued),
    countedApart: counted,
    requestId,
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
    inProcessTurn: options.inProcessTurn,
    running: runningUnder(options),
  };
}
