import { createApp } from '../functions/app.ts';
import type { Env } from '../functions/worker.ts';
import { CountingStore, type StoreCounts } from '../test/support/counting-store.ts';
import type {
  Body,
  GetOptions,
  ListOptions,
  ListResult,
  ObjectInfo,
  PutOptions,
  StoredObject,
} from '../lib/store/object-store.ts';
import { r2StoreFor } from '../lib/store/r2.ts';
import type { Model } from '../lib/models/model.ts';
import { promptByteLength } from './turn-driver.ts';

/** The response header holding the JSON of the request's storage counts (read by bench/workerd-driver.ts). */
const STORAGE_HEADER = 'x-bench-storage';
/**
 * The path answering, after a request, the UTF-8 bytes of the JSON of the last prompt that
 * request handed a model (read by bench/workerd-driver.ts; never routed to the app).
 */
const PROMPT_PATH = '/__bench/prompt-bytes';

const NO_STORAGE: StoreCounts = { get: 0, head: 0, put: 0, list: 0, delete: 0, bytesRead: 0, bytesWritten: 0 };

/**
 * A CountingStore that also knows its counts from before the calls of the current
 * synchronous run (reset by a microtask after the run's first call).
 */
class RunAwareCountingStore extends CountingStore {
  #beforeRun: StoreCounts | undefined;

  /** The counts without the calls issued since the current synchronous run began. */
  get countsBeforeRun(): StoreCounts {
    return this.#beforeRun ?? this.counts;
  }

  #note(): void {
    if (this.#beforeRun) return;
    this.#beforeRun = this.counts;
    queueMicrotask(() => {
      this.#beforeRun = undefined;
    });
  }

  override get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    this.#note();
    return super.get(key, options);
  }

  override head(key: string): Promise<ObjectInfo | null> {
    this.#note();
    return super.head(key);
  }

  override put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    this.#note();
    return super.put(key, body, options);
  }

  override list(prefix: string, options?: ListOptions): Promise<ListResult> {
    this.#note();
    return super.list(prefix, options);
  }

  override delete(keys: string | string[]): Promise<void> {
    this.#note();
    return super.delete(keys);
  }
}

// The store of the request being served. The benchmark sends its requests one at a time, so
// one slot is enough; concurrent requests would share it (this entry is for the benchmark only).
let current: RunAwareCountingStore | undefined;

/** The store the app built for the request being served, if any; clears the slot. */
function takeStore(): RunAwareCountingStore | undefined {
  const store = current;
  current = undefined;
  return store;
}

// A counting store per request over the binding's one R2Store (as functions/worker.ts uses):
// the write probe's verdict is the R2Store's, shared by the wrappers, so only the first
// request pays for the probe. The app may ask for the store more than once a request (its
// services, the facade's history index): each gets the request's one counting store.
// The last prompt handed to a model during the request being served, kept by reference: it
// is measured only when the driver asks for it at PROMPT_PATH, after the request's response,
// so the request's time does not include serializing it.
let prompt: { value: unknown } | undefined;
// The last prompt of the last request answered, as it stood when the app returned the response
// (a model call of background work after it does not replace it).
let answeredPrompt: { value: unknown } | undefined;

/** `model`, keeping each prompt handed to it. */
function measured(model: Model): Model {
  return {
    ...model,
    generate: (request) => {
      prompt = { value: request.prompt };
      return model.generate(request);
    },
    stream: (request) => {
      prompt = { value: request.prompt };
      return model.stream(request);
    },
  };
}

const app = createApp({
  store: (environment) => {
    current ??= new RunAwareCountingStore(r2StoreFor((environment as unknown as Env).BUCKET));
    return current;
  },
  wrapModel: measured,
});

/**
 * The worker of functions/worker.ts with its R2 store counted: every response carries the
 * request's storage counts in `x-bench-storage`, taken when the app returns the response,
 * without the background work it handed to waitUntil (packing), which runs later on the same
 * store. Such work starts before it is handed over: `background(sessions.pack(...))` calls
 * pack first, and pack issues its first storage call at once. So the counts stop before the
 * synchronous run of the second waitUntil call, if any: POST /turns hands the turn itself to
 * waitUntil first (to keep it alive), and what it hands over later is background work. (A
 * route that hands over background work only once, like POST /items, keeps its first call
 * in the counts.) A request that never built a store reports zeros. Not meaningful for
 * streamed responses, whose turn runs on after the response.
 *
 * GET PROMPT_PATH answers `{ promptBytes }`: the UTF-8 bytes of the JSON of the last prompt
 * the previous request handed a model before its response (measured as the memory store's
 * driver measures it, bench/turn-driver.ts `promptByteLength`), or null when it handed none.
 * It is measured then, not during that request, so the request's time is the app's alone.
 */
export default {
  fetch: async (request, environment, context) => {
    if (new URL(request.url).pathname === PROMPT_PATH)
      return Response.json({
        promptBytes: answeredPrompt === undefined ? null : promptByteLength(answeredPrompt.value),
      });
    takeStore();
    prompt = undefined;
    answeredPrompt = undefined;
    let handovers = 0;
    let beforeBackground: StoreCounts | undefined;
    const observed = new Proxy(context, {
      get: (target, property) => {
        if (property === 'waitUntil') {
          return (promise: Promise<unknown>) => {
            if (handovers++ > 0) beforeBackground ??= current?.countsBeforeRun;
            target.waitUntil(promise);
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const response = await app.fetch(request, environment, observed);
    answeredPrompt = prompt;
    const store = takeStore();
    const counts = beforeBackground ?? store?.counts ?? NO_STORAGE;
    const counted = new Response(response.body, response);
    counted.headers.set(STORAGE_HEADER, JSON.stringify(counts));
    return counted;
  },
} satisfies ExportedHandler<Env>;
