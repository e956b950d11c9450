import { TurnInProgressError } from '../errors.ts';
import type { StoredItem } from '../items.ts';
import type { OpenTurn } from '../session/log/types.ts';
import type { ClaimOptions } from '../session/log/claim.ts';
import { closedState, type TurnState } from '../session/log/turns.ts';
import { checkRequest, checkTurnModels, inputItems, requestHash } from './plan.ts';
import { observedClaim } from './observe.ts';
import { requestRecord } from './receipt.ts';
import type { BackgroundTurn, TurnOptions, TurnRequest, TurnServices } from './types.ts';

/**
 * Background turns (`POST .../turns` with `background: true`): the request claims the turn
 * (its record, create-only, so the input is durable and the turn numbered) and answers at
 * once; a runner then takes the claimed turn over by the random `writer` its record carries
 * and runs it to completion with no client connected: a Cloudflare Queues consumer on Workers
 * (functions/worker.ts), the process itself on Node and Deno. docs/STORAGE.md, "Background
 * turns", says what happens when a runner dies.
 */

/**
 * A claimed background turn: with `run`, the turn to hand to a runner; without, the turn its
 * Idempotency-Key claimed already, as it stands (`errorCode`: the failure it ended with).
 */
export interface Claimed {
  turn: number;
  status: TurnState;
  run?: BackgroundTurn;
  errorCode?: string;
  /** A keyed claim whose put of `idem/` failed (its completion writes it): false. */
  keyIndexed?: boolean;
}

type BackgroundClaimOptions = Pick<
  TurnOptions,
  'idempotencyKey' | 'afterTurn' | 'checkConfig' | 'retake' | 'onBusy' | 'onLapsed' | 'enqueues'
> & {
  answerRunning?: boolean;
};

/**
 * Claims a background turn: everything a bad request could fail on first (a 400 stores
 * nothing), then its record, marked `background` in its stored settings. Returns the turn to
 * hand to a runner, or (a repeated Idempotency-Key whose turn is closed) that turn's state. A
 * repeated key whose turn still runs is TurnInProgressError, or with `answerRunning`, when that
 * turn runs in the background, that turn, `in_progress` (the OpenAI facade answers such a retry
 * with the response as it stands; a foreground turn's retry stays a 409: its own request
 * answers it).
 */
export async function claimBackgroundTurn(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: BackgroundClaimOptions = {},
): Promise<Claimed> {
  // A refusal is logged and counted as a failed turn, as a turn in the request's is; a keyed retry
  // (no turn to run) as `replayed`, as a foreground turn's, with the failure it answers again.
  const replayed = ({ run, turn, errorCode }: Claimed) =>
    run ? undefined : { status: 'replayed' as const, turn, ...(errorCode ? { error_code: errorCode } : {}) };
  return observedClaim(services, sessionId, request, () => checkedClaim(services, sessionId, request, options), {
    status: replayed,
  });
}

async function checkedClaim(
  services: TurnServices,
  sessionId: string,
  request: TurnRequest,
  options: BackgroundClaimOptions,
): Promise<Claimed> {
  checkRequest(services, request);
  // Its images and files are checked now and stored once nothing refuses the claim, as a
  // foreground turn's (lib/turn/pipeline.ts).
  const attachments = services.sessions.checkAttachments(inputItems(request));
  const { items: input } = attachments;
  // A budgeted token's turn is checked against its spend at the claim, as any turn of it, and
  // names the budget in its record: its runner charges it (lib/turn/pipeline.ts).
  const spend = services.tokenSpend;
  const spent = spend?.read();
  spent?.catch(() => undefined);
  return claimInput(services, sessionId, {
    input,
    request: { ...requestRecord(request), ...(spend ? { token_budget: spend.budget } : {}) },
    // A model that cannot be run here (its provider's key is missing) stores nothing, as in
    // the foreground (lib/turn/pipeline.ts).
    check: async (config) => {
      checkTurnModels(services, request, config);
      options.checkConfig?.(config);
      if (spend && spent) spend.check(await spent);
    },
    ...(attachments.store ? { beforeRecord: attachments.store } : {}),
    ...(options.afterTurn !== undefined ? { afterTurn: options.afterTurn } : {}),
    ...(options.retake ? { retake: true } : {}),
    ...(options.onBusy ? { onBusy: options.onBusy } : {}),
    ...(options.enqueues ? { enqueues: true } : {}),
    ...(options.onLapsed ? { onLapsed: options.onLapsed } : {}),
    ...(options.idempotencyKey !== undefined
      ? { idempotencyKey: options.idempotencyKey, requestHash: requestHash(input, request) }
      : {}),
  }).catch((error: unknown) => {
    if (!options.answerRunning || !(error instanceof TurnInProgressError) || !error.ownBackground) throw error;
    return { turn: (error.details as { turn: number }).turn, status: 'in_progress' as const };
  });
}

/**
 * The claim of a background turn, unchecked (a queued input was checked when it was queued;
 * what no longer holds fails its turn, the input stored).
 */
export async function claimInput(
  services: TurnServices,
  sessionId: string,
  claimed: Pick<
    ClaimOptions,
    | 'input'
    | 'idempotencyKey'
    | 'keyHash'
    | 'requestHash'
    | 'afterTurn'
    | 'check'
    | 'beforeRecord'
    | 'retake'
    | 'fromQueue'
    | 'onBusy'
    | 'enqueues'
    | 'onLapsed'
  > & {
    request: Record<string, unknown>;
  },
): Promise<Claimed> {
  const writer = crypto.randomUUID();
  const begun = await services.sessions.beginTurn(sessionId, {
    ...claimed,
    request: { ...claimed.request, background: true },
    writer,
  });
  if (begun.kind === 'replay') {
    const errorCode = begun.error?.code;
    return { turn: begun.turn, status: closedState(begun.status, errorCode), ...(errorCode ? { errorCode } : {}) };
  }
  const { turn, keyHash, landing } = begun.turn;
  // Landed already (the claim waited for it); read by a pickup before it removes the entry.
  const keyIndexed = keyHash === undefined || (await landing).keyIndexed;
  return { turn, status: 'queued', run: { session_id: sessionId, turn, writer }, keyIndexed };
}

/** A background turn's request, as its record stores it: the settings and the input items. */
export function storedRequest(turn: OpenTurn): TurnRequest {
  const {
    background: _background,
    token_budget: _budget,
    ...settings
  } = (turn.request ?? {}) as Record<string, unknown>;
  const input = turn.input.map(({ seq: _seq, created_at: _created, ...item }: StoredItem) => item);
  return { ...settings, input } as TurnRequest;
}
