import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ServiceConfig } from '../lib/config.ts';
import { FileStore } from '../lib/store/file.ts';
import type { ObjectStore } from '../lib/store/object-store.ts';
import { DOCS_SCRIPT_SOURCE } from './docs-page.ts';
import { s3StoreFromConfig } from './s3-store-from-env.ts';

/**
 * What the Node and Deno entries share: the store (S3 when S3_ENDPOINT or S3_BUCKET is set,
 * otherwise the file store under DATA_DIR), the listening address (`--port`/`--host`, then
 * PORT/HOST, then 8787 on 127.0.0.1), `--allow-anonymous` (what `npm run start:node` and
 * `start:deno` pass, like `npm start`), the docs page's script, and the store's line of the
 * startup banner (functions/startup-banner.ts).
 */
export interface LocalServerOptions {
  port: number;
  hostname: string;
  /** Set ALLOW_ANONYMOUS=true unless the environment sets it. */
  allowAnonymous: boolean;
}

export function localServerOptions(args: string[], env: Record<string, string | undefined>): LocalServerOptions {
  const { values } = parseArgs({
    args,
    options: { port: { type: 'string' }, host: { type: 'string' }, 'allow-anonymous': { type: 'boolean' } },
    strict: true,
    allowPositionals: false,
  });
  const portText = values.port ?? env.PORT ?? '8787';
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`invalid port ${JSON.stringify(portText)} (--port or PORT)`);
  return { port, hostname: values.host ?? env.HOST ?? '127.0.0.1', allowAnonymous: values['allow-anonymous'] ?? false };
}

/** S3 is configured when its endpoint or bucket is set; otherwise the store is local files. */
function usesS3(config: ServiceConfig): boolean {
  return config.s3.endpoint !== undefined || config.s3.bucket !== undefined;
}

/** The store for a request's settings; one object per setting, so the write probe runs once each. */
export function storeFromConfig(): (config: ServiceConfig) => ObjectStore {
  const s3 = s3StoreFromConfig();
  const files = new Map<string, FileStore>();
  return (config) => {
    if (usesS3(config)) return s3(config);
    const root = resolve(config.dataDir);
    let store = files.get(root);
    if (!store) {
      store = new FileStore(root);
      files.set(root, store);
      // Temp files of processes killed while writing, from before this one started.
      store.sweep().catch((error: unknown) => console.error(`tailgate: sweeping ${root} failed: ${String(error)}`));
    }
    return store;
  };
}

export function describeStore(config: ServiceConfig): string {
  if (usesS3(config)) return `S3 bucket ${config.s3.bucket ?? '(S3_BUCKET not set)'} at ${config.s3.endpoint ?? 'AWS'}`;
  return `files in ${resolve(config.dataDir)}`;
}

const docsScriptPath = fileURLToPath(new URL(`../${DOCS_SCRIPT_SOURCE}`, import.meta.url));
let docsScriptBytes: Promise<Uint8Array<ArrayBuffer>> | undefined;

/** The docs page's script from node_modules, read once. */
export function docsScript(): Promise<Uint8Array<ArrayBuffer>> {
  docsScriptBytes ??= readFile(docsScriptPath).then((buffer) => new Uint8Array(buffer));
  return docsScriptBytes;
}
