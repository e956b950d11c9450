import { sha256Hex } from '../hash.ts';
import {
  resolveRange,
  toBytes,
  type GetOptions,
  type ListOptions,
  type ListResult,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
  type StoredObject,
} from './object-store.ts';

interface Entry {
  body: Uint8Array;
  info: ObjectInfo;
}

/** An in-memory ObjectStore for tests and benchmarks. Same semantics as the real adapters. */
export class MemoryStore implements ObjectStore {
  readonly #entries = new Map<string, Entry>();
  #version = 0;

  async get(key: string, options: GetOptions = {}): Promise<StoredObject | null> {
    const entry = this.#entries.get(key);
    if (!entry) return null;
    const [start, end] = options.range ? resolveRange(options.range, entry.body.length) : [0, entry.body.length];
    return { ...copyInfo(entry.info), body: entry.body.slice(start, end) };
  }

  async head(key: string): Promise<ObjectInfo | null> {
    const entry = this.#entries.get(key);
    return entry ? copyInfo(entry.info) : null;
  }

  async put(key: string, body: Uint8Array | string, options: PutOptions = {}): Promise<ObjectInfo | null> {
    const existing = this.#entries.get(key);
    if (options.onlyIfAbsent && existing) return null;
    if (options.ifMatch !== undefined && existing?.info.etag !== options.ifMatch) return null;
    const bytes = toBytes(body).slice();
    this.#version += 1;
    const info: ObjectInfo = {
      key,
      size: bytes.length,
      etag: `"${sha256Hex(bytes).slice(0, 16)}-${this.#version}"`,
      uploaded: new Date(),
      metadata: { ...(options.metadata ?? {}) },
    };
    this.#entries.set(key, { body: bytes, info });
    return copyInfo(info);
  }

  async list(prefix: string, options: ListOptions = {}): Promise<ListResult> {
    const limit = Math.max(1, Math.min(options.limit ?? 1000, 1000));
    const after = options.cursor ?? options.startAfter;
    const keys = [...this.#entries.keys()]
      .filter((key) => key.startsWith(prefix) && (after === undefined || compareKeys(key, after) > 0))
      .sort(compareKeys);
    const page = keys.slice(0, limit);
    const truncated = keys.length > limit;
    const objects = page.map((key) => copyInfo(this.#entries.get(key)!.info));
    return truncated ? { objects, truncated, cursor: page[page.length - 1]! } : { objects, truncated };
  }

  async delete(keys: string | string[]): Promise<void> {
    for (const key of Array.isArray(keys) ? keys : [keys]) this.#entries.delete(key);
  }
}

/** Byte order of UTF-8 keys, as object stores list them. */
function compareKeys(a: string, b: string): number {
  const left = new TextEncoder().encode(a);
  const right = new TextEncoder().encode(b);
  const length = Math.min(left.length, right.length);
  for (let i = 0; i < length; i++) {
    if (left[i] !== right[i]) return left[i]! - right[i]!;
  }
  return left.length - right.length;
}

function copyInfo(info: ObjectInfo): ObjectInfo {
  return { ...info, uploaded: new Date(info.uploaded), metadata: { ...info.metadata } };
}
