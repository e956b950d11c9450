import { createServices } from '../functions/services.ts';
import { parseServiceConfig, stringEnv } from '../lib/config.ts';
import type { Item } from '../lib/items.ts';
import type { Model } from '../lib/models/model.ts';
import { resolveModel } from '../lib/models/resolve-model.ts';
import { CountingStore, type StoreCounts } from '../test/support/counting-store.ts';
import { MemoryStore } from '../lib/store/memory.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import type { ForkOptions, NewSession, PackOptions, SessionRecord } from '../lib/session/session-log.ts';
import { forkSession } from '../lib/turn/fork.ts';
import {
  packOptions,
  runTurn,
  sessionStrategyPlan,
  type TurnSessionLog,
  type TurnServices,
} from '../lib/turn/index.ts';
import { RecordingStore, summarize } from './recording-store.ts';
import { promptByteLength, type DrivenTurn, type TurnDriver } from './turn-driver.ts';

/**
 * Turns through lib/turn/ `runTurn` with the services the HTTP app builds per request
 * (functions/services.ts), on a MemoryStore wrapped in a CountingStore. The background pack
 * a turn starts is held back and run after the turn, so its storage operations are counted
 * apart from the turn's own (on Workers it runs in waitUntil, after the response).
 */
export class MemoryTurnDriver implements TurnDriver {
  readonly runtime = 'memory';
  readonly counting: CountingStore;
  readonly #services: ReturnType<typeof createServices>;
  readonly #turnServices: TurnServices;
  /** The prompt of the last model call, serialized after the turn is timed. */
  #lastPrompt: unknown = [];
  /** Background work handed over after responses (the session index's refresh), until it settles. */
  readonly #background = new Set<Promise<unknown>>();

  readonly recording: RecordingStore;

  /**
   * `viewCacheBytes` is VIEW_CACHE_BYTES (default 0 here: every turn fetches and parses its
   * view, as in a process that has not seen the session before, so bytes read are the most a
   * turn reads). `runPacks: false` drops the packs turns start (a process that ends after its response).
   */
  constructor(store: ObjectStore = new MemoryStore(), options: { viewCacheBytes?: number; runPacks?: boolean } = {}) {
    this.#runPacks = options.runPacks ?? true;
    this.recording = new RecordingStore(store);
    this.counting = new CountingStore(this.recording);
    const environment = {
      DEFAULT_MODEL: 'echo',
      API_TOKEN: 'bench',
      VIEW_CACHE_BYTES: String(options.viewCacheBytes ?? 0),
    };
    const config = parseServiceConfig(environment);
    this.#services = createServices({
      store: this.counting,
      config,
      env: stringEnv(environment),
      model: (id) => this.#capture(resolveModel(id, {})),
      // As the runtimes do, a failed background task is logged, never an unhandled rejection;
      // close() waits for what is still running.
      background: (task) => {
        const settled: Promise<unknown> = task
          .catch((error: unknown) => console.error('tailgate: background task failed', error))
          .finally(() => this.#background.delete(settled));
        this.#background.add(settled);
      },
      log: (message, details) => console.error(message, details),
      info: () => {},
    });
    const log = this.#services.sessions;
    const sessions: TurnSessionLog = {
      get: (id) => log.get(id),
      beginTurn: (id, options) => log.beginTurn(id, options),
      claimTurn: (id, options) => log.claimTurn(id, options),
      storeAttachments: (id, items) => log.storeAttachments(id, items),
      checkAttachments: (items) => log.checkAttachments(items),
      readContext: (turn, requirement, start, from) => log.readContext(turn, requirement, start, from),
      needsView: (turn, requirement, output) => log.needsView(turn, requirement, output),
      previewContext: (id, requirement) => log.previewContext(id, requirement),
      hydrate: (id, items) => log.hydrate(id, items),
      readMedia: (id, items, needsBytes) => log.readMedia(id, items, needsBytes),
      refreshIndex: (id) => log.refreshIndex(id),
      completeTurn: (turn, outcome) => log.completeTurn(turn, outcome),
      commitTurnContext: (turn, next) => log.commitTurnContext(turn, next),
      renewLease: (turn) => log.renewLease(turn),
      takeLease: (turn) => log.takeLease(turn),
      renewHeldLease: (turn, etag) => log.renewHeldLease(turn, etag),
      releaseHeldLease: (turn, etag) => log.releaseHeldLease(turn, etag),
      holdsLease: (turn, since) => log.holdsLease(turn, since),
      listQueuedInputs: (id, limit) => log.listQueuedInputs(id, limit),
      closedBy: (turn) => log.closedBy(turn),
      closerNotices: (turn) => log.closerNotices(turn),
      leaveDeleted: (turn) => log.leaveDeleted(turn),
      leaveGone: (turn) => log.leaveGone(turn),
      storeStoppedSpend: (turn, spent) => log.storeStoppedSpend(turn, spent),
      storeCharge: (turn, spent) => log.storeCharge(turn, spent),
      queued: (scope) => log.queued(scope),
      journal: () => log.journal(),
      getTurn: (id, turn) => log.getTurn(id, turn),
      enqueue: (id, input) => log.enqueue(id, input),
      readQueued: (scope, keyHash) => log.readQueued(scope, keyHash),
      copyBlobs: (id, from, items) => log.copyBlobs(id, from, items),
      queuedTakenBefore: (scope, keyHash) => log.queuedTakenBefore(scope, keyHash),
      queuedTakenUp: (scope, entry, input) => log.queuedTakenUp(scope, entry, input),
      removeQueued: (scope, keyHash) => log.removeQueued(scope, keyHash),
      lowerQueueSignal: (scope, etag) => log.lowerQueueSignal(scope, etag),
      markQueued: (scope, keyHash, writer) => log.markQueued(scope, keyHash, writer),
      queuedWithdrawing: (scope, keyHash) => log.queuedWithdrawing(scope, keyHash),
      withdrawQueued: (id, keyHash) => log.withdrawQueued(id, keyHash),
      cancelTurn: (id, turn) => log.cancelTurn(id, turn),
      closeIfExpired: (id, turn) => log.closeIfExpired(id, turn),
      journalRun: (id, turn) => log.journalRun(id, turn),
      completedResponse: (id, turn) => log.completedResponse(id, turn),
      scope: (id) => log.scope(id),
      exists: (scope) => log.exists(scope),
      getWithNewestTurn: (id) => log.getWithNewestTurn(id),
      deleteTurn: (id, turn, options) => log.deleteTurn(id, turn, options),
      // Held back: run by runBackground() after the turn is measured.
      pack: async (id, options) => {
        this.#pendingPacks.push({ id, options });
        return { packed: false, deleted: 0 };
      },
    };
    this.#turnServices = { ...this.#services, sessions };
  }

  #pendingPacks: { id: string; options: PackOptions | undefined }[] = [];
  readonly #runPacks: boolean;

  #capture(model: Model): Model {
    return {
      ...model,
      generate: (request) => {
        this.#lastPrompt = request.prompt;
        return model.generate(request);
      },
    };
  }

  /** The prompt of the last model call. */
  get lastPrompt(): unknown {
    return this.#lastPrompt;
  }

  async session(id: string): Promise<SessionRecord> {
    return this.#services.sessions.get(id);
  }

  /** POST /v1/sessions/{id}/fork's code (lib/turn/fork.ts), its background pack (the fork's first view) run too. */
  async fork(parentId: string, options: ForkOptions): Promise<SessionRecord> {
    const sessions = {
      fork: this.#services.sessions.fork.bind(this.#services.sessions),
      deleteTurn: this.#services.sessions.deleteTurn.bind(this.#services.sessions),
      pack: this.#turnServices.sessions.pack,
    };
    const fork = await forkSession({ ...this.#services, sessions }, parentId, options);
    await this.runBackground();
    return fork;
  }

  /** Whether a segment of session `id` holds seq `seq`. */
  async isPacked(id: string, seq: number): Promise<boolean> {
    const listed = await this.recording.list(`sessions/${id}/turn/`, { limit: 1000 });
    return listed.objects.some(({ key }) => {
      const range = /-(\d+)-(\d+)\.seg$/.exec(key);
      return range !== null && Number(range[1]) <= seq && seq <= Number(range[2]);
    });
  }

  /** `fields`: the session's other settings (its strategies, their config). */
  async createSession(id: string, instructions: string, fields: Omit<NewSession, 'id'> = {}): Promise<void> {
    await this.#services.sessions.create({ ...fields, id, instructions });
  }

  /** Packs the log now, as a turn's background task does (the session's strategies), for loading without turns. */
  async pack(id: string): Promise<void> {
    const session = await this.#services.sessions.get(id);
    await this.#services.sessions.pack(id, packOptions(sessionStrategyPlan(this.#services.env, session)));
  }

  async newestPage(id: string): Promise<StoreCounts> {
    this.counting.reset();
    await this.#services.sessions.listItems(id, { limit: 100 });
    return this.counting.counts;
  }

  readonly appendCounts: StoreCounts[] = [];
  readonly appendKinds: Map<string, { count: number; bytes: number }>[] = [];

  async append(id: string, items: Item[]): Promise<number> {
    this.counting.reset();
    this.recording.reset();
    // As POST /items: images and files sent inline are stored as blobs first.
    const stored = await this.#services.sessions.storeAttachments(id, items);
    const lastSeq = (await this.#services.sessions.append(id, stored)).last_seq;
    this.appendCounts.push(this.counting.counts);
    this.appendKinds.push(summarize(this.recording.reset()));
    return lastSeq;
  }

  async turn(id: string, request: Parameters<TurnDriver['turn']>[1]): Promise<DrivenTurn> {
    this.counting.reset();
    this.recording.reset();
    const start = performance.now();
    const response = await runTurn(this.#turnServices, id, request);
    const ms = performance.now() - start;
    const storage = this.counting.counts;
    const operations = this.recording.reset();
    const promptBytes = promptByteLength(this.#lastPrompt);
    this.counting.reset();
    await this.runBackground();
    this.recording.reset();
    return { ms, response, storage, operations, background: this.counting.counts, promptBytes };
  }

  /** Runs the packs the turns started (what waitUntil runs on Workers). */
  async runBackground(): Promise<void> {
    // Background work starts on a timer after the response (lib/turn/append.ts afterResponse).
    await new Promise((resolve) => setTimeout(resolve, 0));
    const packs = this.#pendingPacks;
    this.#pendingPacks = [];
    if (!this.#runPacks) return;
    for (const { id, options } of packs) await this.#services.sessions.pack(id, options);
  }

  async postNotice(id: string, content: string): Promise<void> {
    await this.#services.inbox.post(id, { content });
  }

  /** Waits for the background work still running (a caller may then remove the store's files). */
  async close(): Promise<void> {
    await Promise.all(this.#background);
  }
}
