import type { ServiceConfig } from '../lib/config.ts';
import { Inbox } from '../lib/inbox/index.ts';
import type { Model } from '../lib/models/model.ts';
import type { LogScope } from '../lib/session/keys.ts';
import type { SessionConfig } from '../lib/session/records.ts';
import { sessionCreatedIn } from '../lib/session/log/config-object.ts';
import { SessionLog, type SessionLogOptions } from '../lib/session/session-log.ts';
import type { ClosedTurn } from '../lib/session/log/types.ts';
import { viewPolicy } from '../lib/turn/view-policy.ts';
import { afterResponse } from '../lib/turn/after-response.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { TokenSpend, type TokenBudget } from '../lib/ledger/token-spend.ts';
import type { TokenEncoders } from '../lib/tokens/token-counter.ts';
import {
  pickUpAfterLeaseClose,
  pickUpFirst,
  runInProcess,
  type BackgroundTurn,
  type RunningTurns,
  type TurnObservation,
  type TurnServices,
} from '../lib/turn/index.ts';
import { LEASE_EXPIRED } from '../lib/errors.ts';
import type { Tracing } from './tracing.ts';
import { turnWebhooks, type WebhookSink } from '../lib/webhooks/events.ts';
import { turnIntents } from '../lib/webhooks/intent.ts';
import { indexTurnCompaction } from '../lib/openai/compaction-index.ts';

/** What the routes work with: the turn pipeline's services, with the full log and inbox. */
export interface AppServices extends TurnServices {
  sessions: SessionLog;
  inbox: Inbox;
  /** The request's object store, for what lives beside the sessions (lib/openai/stored-responses.ts). */
  store: ObjectStore;
  /** `model` without the token budget's price check: for what calls no model (the prompt preview). */
  previewModel: (id: string) => Model;
}

export interface ServiceInputs {
  store: ObjectStore;
  config: ServiceConfig;
  env: Record<string, string | undefined>;
  model: (id: string) => Model;
  background: (task: Promise<unknown>) => void;
  log: (message: string, details?: unknown) => void;
  /** Routine events (TurnServices.info). */
  info: (message: string) => void;
  clock?: () => Date;
  tokenEncoders?: TokenEncoders;
  /** Sends a background turn to a queue (Workers); without it, the process runs it. */
  startBackground?: ((run: BackgroundTurn) => Promise<void>) | undefined;
  /** Told of each background turn the process runs for want of `startBackground` (AppOptions.inProcessTurn). */
  inProcessTurn?: ((run: BackgroundTurn) => void) | undefined;
  /**
   * The store, webhook sink and observer of a turn this process runs after the response (a
   * background or queued one, `runInProcess`), over the same backend: its storage operations
   * counted apart from the request's, for its own log line (functions/service-inputs.ts).
   */
  countedApart?: ((run?: BackgroundTurn) => Pick<ServiceInputs, 'store' | 'webhookSink' | 'observeTurn'>) | undefined;
  /** The `x-request-id` of the request served (TurnServices.requestId); none outside one. */
  requestId?: string | null;
  /** Told how each turn ended (functions/turn-log.ts). */
  observeTurn?: TurnServices['observeTurn'];
  /** Told what each manual compaction's summary used (functions/turn-log.ts). */
  observeCompaction?: TurnServices['observeCompaction'] | undefined;
  /** OpenTelemetry traces (functions/tracing.ts); undefined when off. */
  tracing?: Tracing | undefined;
  /** Runs on every session config read (the revocation check of a session-bound token). */
  checkSessionConfig?: ((config: SessionConfig) => void) | undefined;
  /** The budget the request's scoped token carries (functions/tokens.ts), if any. */
  tokenBudget?: TokenBudget | null;
  /** Where webhook events go: the Workers queue, else the store's outbox (functions/app.ts). */
  webhookSink?: WebhookSink | undefined;
  /** The app's running turn attempts (functions/service-inputs.ts), which a close written here stops at once. */
  running?: RunningTurns | undefined;
}

/** The session log of a deployment's settings (the routes', and the retention sweep's). */
export function sessionLogFor(
  store: ObjectStore,
  config: ServiceConfig,
  extra: Pick<
    SessionLogOptions,
    'clock' | 'checkConfig' | 'onClosed' | 'onClaimed' | 'onLeaseClosed' | 'onQueueWaiting' | 'onClosedByOther' | 'log'
  > = {},
): SessionLog {
  return new SessionLog(store, {
    viewPolicy,
    keyPrefix: config.keyPrefix,
    leaseMs: config.turnLeaseMs,
    blobThreshold: config.blobThresholdBytes,
    attachmentLimits: { maxImageBytes: config.maxImageBytes, maxFileBytes: config.maxFileBytes },
    viewCacheBytes: config.viewCacheBytes,
    recordCacheBytes: config.recordCacheBytes,
    sessionTtlDays: config.sessionTtlDays,
    defaultBudget: config.defaultSessionBudget,
    ...extra,
  });
}

/**
 * The session log option by which a close it writes for someone else (a cancel, a delete, a
 * lapsed lease's close: a request's, the queue sweep's, or the webhook drainer's) stops at once
 * the turn's attempts `running` holds (lib/turn/running.ts). A lapsed lease's close of a turn
 * none of them runs is told to `observeTurn` (its log line and metrics, functions/turn-log.ts):
 * its runner died untold, and only the process whose close landed tells it, once.
 */
export function closesByOthers(
  running: RunningTurns | undefined,
  observeTurn: TurnServices['observeTurn'],
): Pick<SessionLogOptions, 'onClosedByOther'> {
  if (!running && !observeTurn) return {};
  return {
    onClosedByOther: (closed: ClosedTurn) => {
      const runsHere = running?.stop(closed) ?? false;
      if (runsHere || closed.error?.code !== LEASE_EXPIRED) return;
      try {
        observeTurn?.(lapsedTurn(closed));
      } catch {
        // A log line that failed is not the close's failure: what follows the close still runs.
      }
    },
  };
}

/**
 * How a turn closed as `lease_expired` by someone other than its runner ended, as far as its
 * close knows: failed, its model if its request named one, no usage (its spend died with its
 * runner), from its claim to its close, no content.
 */
function lapsedTurn(closed: ClosedTurn): TurnObservation {
  const duration = Date.parse(closed.completedAt) - Date.parse(closed.claimedAt ?? closed.completedAt);
  return {
    session_id: closed.scope.id,
    turn: closed.turn,
    status: 'failed',
    error_code: LEASE_EXPIRED,
    model: closed.model ?? null,
    usage: null,
    compaction: null,
    duration_ms: Math.max(0, duration),
    first_output_ms: null,
    request: { input: [] },
    output: [],
  };
}

/** Builds one request's services from its store and its freshly parsed config. */
export function createServices(inputs: ServiceInputs): AppServices {
  const { store, config, log } = inputs;
  const clock = inputs.clock ? { clock: inputs.clock } : {};
  const { tracing, observeTurn, webhookSink, running } = inputs;
  const now = inputs.clock ?? (() => new Date());
  const onClosed = config.webhooks && webhookSink ? turnWebhooks(config.webhooks, webhookSink, now) : undefined;
  const tokenSpend = inputs.tokenBudget ? new TokenSpend(store, config.keyPrefix, inputs.tokenBudget) : undefined;
  // Always the store's outbox, also beside a Workers queue: its drainer resolves the intents.
  const onClaimed =
    onClosed && config.webhooks ? turnIntents(config.webhooks, store, config.keyPrefix, now) : undefined;
  const services: AppServices = {
    sessions: sessionLogFor(store, config, {
      ...clock,
      checkConfig: inputs.checkSessionConfig,
      onClosed,
      onClaimed,
      onLeaseClosed: pickUpAfterLeaseClose(() => services),
      onQueueWaiting: pickUpFirst(() => services),
      ...closesByOthers(running, observeTurn),
      ...(running ? { onDeleted: (scope: LogScope) => running.deleted(scope) } : {}),
      log,
    }),
    inbox: new Inbox(store, {
      keyPrefix: config.keyPrefix,
      sessionExists: sessionCreatedIn(store, config.keyPrefix),
      // The route's own read of the config checks a bound token again, as the session log's reads do.
      checkedSession: sessionCreatedIn(store, config.keyPrefix, inputs.checkSessionConfig),
      maxNoticeBytes: config.maxNoticeBytes,
      maxNoticesPerTurn: config.maxNoticesPerTurn,
      maxPendingNotices: config.maxPendingNotices,
      log: (event) => {
        if (event.level !== 'warn') return;
        // The error only when there is one: a set-aside notice has none, and `error: undefined` reads as a lost one.
        log(`tailgate inbox: ${event.message}`, {
          key: event.key,
          ...(event.error === undefined ? {} : { error: event.error }),
        });
      },
      ...clock,
    }),
    store,
    clock: now,
    config,
    env: inputs.env,
    // A token whose budget caps its cost runs only models with a price (TokenSpend.checkPriced).
    model: tokenSpend
      ? (id) => {
          const model = inputs.model(id);
          tokenSpend.checkPriced(model.id, config.modelPrices);
          return model;
        }
      : inputs.model,
    previewModel: inputs.model,
    background: inputs.background,
    log,
    info: inputs.info,
    ...(inputs.tokenEncoders ? { tokenEncoders: inputs.tokenEncoders } : {}),
    // A claimed background or queued turn runs as the token its record names (charged to it, its
    // model checked at its claim), not as the request that runs it: without this one's budget.
    startBackground:
      inputs.startBackground ??
      (async (run) => {
        inputs.inProcessTurn?.(run);
        await markForSweep(services, run);
        return runInProcess(inProcess(services, inputs, run), run);
      }),
    requestId: inputs.requestId ?? null,
    ...(observeTurn ? { observeTurn } : {}),
    ...(inputs.observeCompaction ? { observeCompaction: inputs.observeCompaction } : {}),
    // A turn's spans are exported once it ended, on a timer so that serializing and sending
    // them is not part of its response (waitUntil on Workers).
    ...(tracing
      ? {
          tracer: tracing.tracer,
          observeTurn: (outcome) => {
            observeTurn?.(outcome);
            afterResponse(inputs, () => tracing.flush());
          },
        }
      : {}),
    ...(tokenSpend ? { tokenSpend } : {}),
    spendOf: (budget) => new TokenSpend(store, config.keyPrefix, budget),
    // Indexed under its item as a foreground response's compaction is, for the caller that claimed it.
    onBackgroundCompaction: (compacted) =>
      indexTurnCompaction({ services, config, caller: compacted.caller }, compacted),
    ...(onClosed && webhookSink ? { webhookSink } : {}),
    ...(running ? { running } : {}),
  };
  return services;
}

/**
 * Marks the session of a background turn this process is to run for the sweep of queues
 * (lib/session/log/queue-markers.ts), before its runner starts and before the turn is answered:
 * a process that dies while the turn runs (kill -9) leaves it to its lease, and the first sweep
 * after the lease ran out closes it (failed, `lease_expired`: its webhook event, then the inputs
 * queued behind it) with no client coming. The sweep unmarks the session once the turn ended. A
 * mark that fails is logged, and the turn runs: only its process dying leaves it to its readers.
 */
async function markForSweep(services: AppServices, run: BackgroundTurn): Promise<void> {
  await services.sessions.markForSweep(run.session_id).catch((error: unknown) => {
    services.log(
      `tailgate: background turn ${run.turn} of session ${run.session_id} runs unmarked for the sweep of queues: ` +
        'should this process die while it runs, it closes once its lease ran out and a reader or the next writer comes',
      error,
    );
  });
}

/**
 * The services of a turn run in process after the response: without the request token's budget,
 * and, where the inputs count storage operations, with a counter of its own (its log line counts
 * its run's operations alone, as a queue consumer's does, not the request's that started it; a
 * queued input's turn is named by the request that queued it, `run.enqueued_by`).
 */
function inProcess(services: AppServices, inputs: ServiceInputs, run: BackgroundTurn): AppServices {
  if (!inputs.countedApart) return withoutTokenBudget(services, inputs);
  return createServices({ ...inputs, ...inputs.countedApart(run), tokenBudget: null });
}

/** `services` without the request token's budget: its spend, and the price check of its models. */
function withoutTokenBudget(services: AppServices, inputs: ServiceInputs): AppServices {
  const { tokenSpend: _, ...rest } = services;
  return { ...rest, model: inputs.model };
}
