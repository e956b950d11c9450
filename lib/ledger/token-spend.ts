import { z } from 'zod';
import { backoff, checkInvariant, MAX_CLAIM_ATTEMPTS } from '../session/log/context.ts';
import { InvalidRequestError, StorageError } from '../errors.ts';
import type { ObjectStore } from '../store/object-store.ts';
import { parseStoredOrUndefined } from '../session/records.ts';
import { checkBudget } from './budget.ts';
import type { ModelPrices } from './prices.ts';
import {
  addToLedger,
  budgetSchema,
  EMPTY_LEDGER,
  ledgerSchema,
  NO_USAGE,
  type Budget,
  type Ledger,
  type TurnUsage,
} from './usage.ts';

/**
 * What a scoped token with a budget spent, across all the sessions it took turns in
 * (docs/STORAGE.md, "Token spend"; the bound on overshoot is in docs/SECURITY.md, "Token
 * budgets"). One object per token, `<KEY_PREFIX>token-spend/<exp>-<id>`: the token's expiry
 * (Unix seconds, 12 digits) then its random id, so the sweep finds expired ones in key order.
 *
 * A turn reads it alongside its claim's reads (no round trip of its own) and is refused when
 * a limit is reached; a completed turn adds its usage after its completion landed (a background
 * turn's: just before it, lib/turn/background-charge.ts) and before
 * its answer, with compare-and-set over what the claim read (one put; a get and another put when
 * something else charged meanwhile), so the totals are exact whatever runs concurrently.
 */

/** A token's budget as its claims carry it: its id, its expiry and its limits. */
export interface TokenBudget {
  id: string;
  /** Unix seconds: the token's `exp`. */
  expires: number;
  limits: Budget;
}

/** A TokenBudget as a background turn's record keeps it (`token_budget`), checked when read back. */
export const tokenBudgetSchema = z
  .object({
    id: z.string().regex(/^[0-9a-f]{32}$/),
    expires: z.number().int().nonnegative(),
    limits: budgetSchema,
  })
  .strict();

const spendRecordSchema = z.object({ ledger: ledgerSchema, expires_at: z.string() }).strict();

const SPEND_FOLDER = 'token-spend/';

export function spendKey(keyPrefix: string, budget: Pick<TokenBudget, 'id' | 'expires'>): string {
  return `${keyPrefix}${SPEND_FOLDER}${String(budget.expires).padStart(12, '0')}-${budget.id}`;
}

/** One token's spend record on a store. */
export class TokenSpend {
  readonly budget: TokenBudget;
  readonly #store: ObjectStore;
  readonly #key: string;
  /** The record as `read` found it (null: none), which the next charge writes over without a get. */
  #read: { ledger: Ledger; etag: string } | null | undefined;
  /** The record as this object's last charge wrote it, which `takeBackTurn` writes over without a get. */
  #written: { ledger: Ledger; etag: string } | undefined;

  constructor(store: ObjectStore, keyPrefix: string, budget: TokenBudget) {
    this.budget = budget;
    this.#store = store;
    this.#key = spendKey(keyPrefix, budget);
  }

  /** What the token's completed turns spent, as stored now (nothing stored: nothing spent). */
  async read(): Promise<Ledger> {
    this.#read = await this.#get();
    return this.#read?.ledger ?? EMPTY_LEDGER;
  }

  /** Reads what the token spent (read) and refuses it as `check` does: a call made on no other read's way. */
  async checkNow(): Promise<void> {
    this.check(await this.read());
  }

  /** Throws BudgetExhaustedError (402) when `spent` reached one of the token's limits. */
  check(spent: Ledger): void {
    checkBudget(this.budget.limits, spent, 'token');
  }

  /**
   * Throws InvalidRequestError (400 naming `model`) when the token's budget sets `max_cost_usd`
   * and model `id` has no price in `prices`: what it costs would count toward no limit, and the
   * token's holder chooses the model of its turns. `setting`: the deployment setting that names
   * the model, where the request did not (SUMMARY_MODEL), which the message and details name.
   */
  checkPriced(id: string, prices: ModelPrices, setting?: string): void {
    if (this.budget.limits.max_cost_usd === undefined || prices[id] !== undefined) return;
    throw new InvalidRequestError(
      `model ${id}${setting ? ` (${setting})` : ''} has no price (MODEL_PRICES), and this token's budget sets ` +
        'max_cost_usd, which could not count what it costs',
      { field: 'model', model: id, ...(setting ? { setting } : {}) },
    );
  }

  /**
   * Adds one completed turn's usage (`turns` 1), or a compaction's summary (`turns` 0), with the
   * summary a turn made (`summary`): read (or as `read` found it), add, write if unchanged since
   * the read (else again). `turns` -1: `takeBackTurn`.
   */
  async charge(usage: TurnUsage, turns: -1 | 0 | 1 = 1, summary?: TurnUsage): Promise<Ledger> {
    for (let attempt = 0; attempt < MAX_CLAIM_ATTEMPTS; attempt++) {
      const current = this.#read !== undefined && attempt === 0 ? this.#read : await this.#get();
      this.#read = undefined;
      const charged = addToLedger(current?.ledger ?? EMPTY_LEDGER, usage, turns);
      const ledger = summary ? addToLedger(charged, summary, 0) : charged;
      // As `#get` reads it back: a record it refused would count as nothing spent, the limits gone.
      checkInvariant(ledgerSchema, ledger);
      const body = JSON.stringify({ ledger, expires_at: new Date(this.budget.expires * 1000).toISOString() });
      const written = await this.#store.put(
        this.#key,
        body,
        current ? { ifMatch: current.etag } : { onlyIfAbsent: true },
      );
      if (written) {
        this.#written = { ledger, etag: written.etag };
        return ledger;
      }
      await backoff(attempt);
    }
    throw new StorageError(`token spend ${this.budget.id}: too many concurrent writers`);
  }

  /**
   * Takes back one turn this object's last charge counted, its usage left (its provider billed
   * it): one put over what that charge wrote (a get and another put when something else charged
   * meanwhile). No charge of it landed: nothing. A record that counts no turn is left as it is
   * (the totals' invariant throws).
   */
  async takeBackTurn(): Promise<void> {
    if (this.#written === undefined) return;
    this.#read = this.#written;
    await this.charge(NO_USAGE, -1);
  }

  /**
   * `charge`, landed before the answer it is awaited for: a failure to store it is logged, not
   * answered. Handed to `background` too (a Worker's waitUntil), so a client gone before its
   * answer does not cut the charge short. Resolves whether it landed.
   */
  async chargeNow(
    services: { log: (message: string, details?: unknown) => void; background: (task: Promise<unknown>) => void },
    ...args: Parameters<TokenSpend['charge']>
  ): Promise<boolean> {
    const landing = this.charge(...args).then(
      () => true,
      (error: unknown) => {
        services.log('tailgate: could not charge a token', error);
        return false;
      },
    );
    services.background(landing);
    return await landing;
  }

  async #get(): Promise<{ ledger: Ledger; etag: string } | null> {
    const stored = await this.#store.get(this.#key);
    if (!stored) return null;
    return { ledger: spentIn(stored.body), etag: stored.etag };
  }
}

/**
 * The ledger of a stored spend record. One this service did not write (not UTF-8, not JSON, not
 * the schema) counts as nothing spent, and the next charge replaces it.
 */
function spentIn(body: Uint8Array): Ledger {
  return parseStoredOrUndefined(body, spendRecordSchema)?.ledger ?? EMPTY_LEDGER;
}

/**
 * Deletes the spend records of tokens that expired before `now` (an expired token takes no
 * more turns, so its record is never read again). Keys sort by expiry: the walk stops at the
 * first one still valid. Returns how many it deleted.
 */
export async function sweepTokenSpend(store: ObjectStore, keyPrefix: string, now: Date): Promise<number> {
  const prefix = `${keyPrefix}${SPEND_FOLDER}`;
  const nowSeconds = Math.floor(now.getTime() / 1000);
  let deleted = 0;
  let cursor: string | undefined;
  do {
    const page = await store.list(prefix, cursor === undefined ? {} : { cursor });
    const expired = page.objects
      .map((info) => info.key)
      .filter((key) => Number(key.slice(prefix.length, prefix.length + 12)) < nowSeconds);
    if (expired.length > 0) await store.delete(expired);
    deleted += expired.length;
    if (expired.length < page.objects.length) break;
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor !== undefined);
  return deleted;
}
