import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unstable_dev, type Unstable_DevWorker } from 'wrangler';
import type { Item } from '../lib/items.ts';
import type { StoreCounts } from '../test/support/counting-store.ts';
import type { TurnRequest, TurnResponse } from '../lib/turn/index.ts';
import type { DrivenTurn, TurnDriver } from './turn-driver.ts';

const TOKEN = 'bench';
/** Set by bench/counting-worker.ts on every response. */
const STORAGE_HEADER = 'x-bench-storage';
/** Answered by bench/counting-worker.ts: the prompt bytes of the request before. */
const PROMPT_PATH = '/__bench/prompt-bytes';

/**
 * The worker in workerd with a local R2 bucket (miniflare, persisted to a temporary
 * directory), driven over HTTP on loopback. The entry is bench/counting-worker.ts: the app of
 * functions/worker.ts with its R2 store wrapped in a CountingStore, bundled by wrangler from a
 * snapshot of the sources taken at start. Times are the client's: request sent to response
 * body read. Storage counts are the worker's, from the `x-bench-storage` header: the
 * request's own operations until the app returned the response (packing, run in waitUntil
 * after it, is not in them). The prompt's bytes are what the worker handed its model, measured
 * as the memory store's driver measures it, but outside the timed request: the worker keeps
 * the prompt and measures it when the driver asks for it (GET /__bench/prompt-bytes) after
 * the turn's response was read.
 */
export class WorkerdTurnDriver implements TurnDriver {
  readonly runtime = 'workerd';
  readonly #worker: Unstable_DevWorker;
  readonly #base: string;
  readonly #directories: string[];

  private constructor(worker: Unstable_DevWorker, directories: string[]) {
    this.#worker = worker;
    this.#directories = directories;
    this.#base = `http://${worker.address}:${worker.port}`;
  }

  /** `logLevel`: wrangler's log level ('error' by default; 'debug' shows workerd's own messages). */
  static async start(
    options: { logLevel?: 'none' | 'error' | 'warn' | 'info' | 'log' | 'debug' } = {},
  ): Promise<WorkerdTurnDriver> {
    // The worker runs from a snapshot of the sources: wrangler reloads the worker when files
    // it bundled change, which would restart it mid-request while the sources are edited.
    const root = fileURLToPath(new URL('..', import.meta.url));
    const snapshot = mkdtempSync(join(tmpdir(), 'tailgate-bench-src-'));
    // bench/counting-worker.ts imports only from lib/, functions/, the counting store and
    // bench/turn-driver.ts (its prompt measure; the rest of that file is types).
    // `.assets` is wrangler.toml's static assets directory (the /docs script, npm run assets).
    for (const entry of [
      'lib',
      'functions',
      'bench/counting-worker.ts',
      'bench/turn-driver.ts',
      'test/support/counting-store.ts',
      'wrangler.toml',
      'package.json',
      'tsconfig.json',
      'tsconfig.base.json',
      '.assets',
    ])
      cpSync(join(root, entry), join(snapshot, entry), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(snapshot, 'node_modules'), 'dir');
    const persist = mkdtempSync(join(tmpdir(), 'tailgate-bench-r2-'));
    const worker = await unstable_dev(join(snapshot, 'bench/counting-worker.ts'), {
      config: join(snapshot, 'wrangler.toml'),
      // No view cache: every turn fetches its view, as in an isolate new to the session.
      vars: { API_TOKEN: TOKEN, ALLOW_ANONYMOUS: 'false', DEFAULT_MODEL: 'echo', VIEW_CACHE_BYTES: '0' },
      persistTo: persist,
      ip: '127.0.0.1',
      logLevel: options.logLevel ?? 'error',
      experimental: { disableExperimentalWarning: true, watch: false },
    });
    return new WorkerdTurnDriver(worker, [snapshot, persist]);
  }

  async #request<Result>(method: string, path: string, body?: unknown): Promise<Result> {
    return (await this.#exchange<Result>(method, path, body)).result;
  }

  async #exchange<Result>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ result: Result; storage?: StoreCounts }> {
    const response = await fetch(`${this.#base}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
    const header = response.headers.get(STORAGE_HEADER);
    return {
      result: JSON.parse(text) as Result,
      ...(header ? { storage: JSON.parse(header) as StoreCounts } : {}),
    };
  }

  /** The bytes of the last prompt the previous request handed a model, measured in the worker now. */
  async #promptBytes(): Promise<number | undefined> {
    const { promptBytes } = await this.#request<{ promptBytes: number | null }>('GET', PROMPT_PATH);
    return promptBytes ?? undefined;
  }

  async createSession(id: string, instructions: string): Promise<void> {
    await this.#request('POST', '/v1/sessions', { id, instructions });
  }

  async append(id: string, items: Item[]): Promise<number> {
    return (await this.#request<{ last_seq: number }>('POST', `/v1/sessions/${id}/items`, { items })).last_seq;
  }

  async turn(id: string, request: TurnRequest): Promise<DrivenTurn> {
    const start = performance.now();
    const { result: response, storage } = await this.#exchange<TurnResponse>(
      'POST',
      `/v1/sessions/${id}/turns`,
      request,
    );
    const ms = performance.now() - start;
    const promptBytes = await this.#promptBytes();
    return { ms, response, ...(storage ? { storage } : {}), ...(promptBytes !== undefined ? { promptBytes } : {}) };
  }

  async postNotice(id: string, content: string): Promise<void> {
    await this.#request('POST', `/v1/sessions/${id}/inbox`, { content });
  }

  async close(): Promise<void> {
    await this.#worker.stop();
    for (const directory of this.#directories) rmSync(directory, { recursive: true, force: true });
  }
}
