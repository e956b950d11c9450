import { R2Store } from '../lib/store/r2.ts';
import { createApp } from './app.ts';

/** The Workers bindings: the R2 bucket, an optional Workers AI binding, and string vars. */
export interface Env {
  BUCKET: R2Bucket;
  AI?: unknown;
  [name: string]: unknown;
}

// One store per bucket binding for the isolate's life: the binding is the same object on
// every request, and the write probe's verdict is remembered per store.
const stores = new WeakMap<R2Bucket, R2Store>();
const app = createApp({
  store: (environment) => {
    const bucket = (environment as unknown as Env).BUCKET;
    let store = stores.get(bucket);
    if (!store) stores.set(bucket, (store = new R2Store(bucket)));
    return store;
  },
});

export default {
  fetch: (request, environment, context) => app.fetch(request, environment, context),
} satisfies ExportedHandler<Env>;
