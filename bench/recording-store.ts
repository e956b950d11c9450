import type {
  Body,
  GetOptions,
  ListOptions,
  ListResult,
  ObjectInfo,
  ObjectStore,
  PutOptions,
  StoredObject,
} from '../lib/store/object-store.ts';

/** One storage call as the benchmark sees it: the operation, what kind of key, bytes read. */
export interface RecordedOperation {
  operation: 'get' | 'head' | 'put' | 'list' | 'delete';
  kind: string;
  bytes: number;
}

/**
 * Records every call with the kind of key it touched (session config, record, completion,
 * view, segment index or range, blob, inbox...), so the benchmark can say where a
 * turn's operations and bytes go. Keys are the session log's and the inbox's layout.
 */
export class RecordingStore implements ObjectStore {
  readonly inner: ObjectStore;
  operations: RecordedOperation[] = [];

  constructor(inner: ObjectStore) {
    this.inner = inner;
  }

  reset(): RecordedOperation[] {
    const recorded = this.operations;
    this.operations = [];
    return recorded;
  }

  async get(key: string, options?: GetOptions): Promise<StoredObject | null> {
    const entry: RecordedOperation = { operation: 'get', kind: keyKind(key, options), bytes: 0 };
    this.operations.push(entry);
    const object = await this.inner.get(key, options);
    entry.bytes = object?.body.length ?? 0;
    return object;
  }

  async head(key: string): Promise<ObjectInfo | null> {
    this.operations.push({ operation: 'head', kind: keyKind(key), bytes: 0 });
    return this.inner.head(key);
  }

  async put(key: string, body: Body, options?: PutOptions): Promise<ObjectInfo | null> {
    this.operations.push({ operation: 'put', kind: keyKind(key), bytes: 0 });
    return this.inner.put(key, body, options);
  }

  async list(prefix: string, options?: ListOptions): Promise<ListResult> {
    this.operations.push({ operation: 'list', kind: keyKind(prefix), bytes: 0 });
    return this.inner.list(prefix, options);
  }

  async delete(keys: string | string[]): Promise<void> {
    this.operations.push({
      operation: 'delete',
      kind: keyKind(Array.isArray(keys) ? (keys[0] ?? '') : keys),
      bytes: 0,
    });
    return this.inner.delete(keys);
  }
}

function keyKind(key: string, options?: GetOptions): string {
  const name = key.replace(/^.*?sessions\/[^/]+\//, '');
  if (name === 'session.json') return 'session config';
  if (name.startsWith('turn/')) {
    if (name.endsWith('.seg')) {
      if (!options?.range) return 'segment (whole)';
      return 'suffix' in options.range ? 'segment tail (index, messages)' : 'segment range (tool lines)';
    }
    if (name.endsWith('.done')) return 'turn completion';
    if (name.endsWith('.view')) return 'view';
    if (name === 'turn/') return 'records listing';
    return 'turn record';
  }
  const top = name.split('/')[0] ?? name;
  return (
    { blob: 'blob (out-of-line output)', inbox: 'inbox', inbox_removed: 'inbox delivered', idem: 'idempotency claim' }[
      top
    ] ?? top
  );
}

/** Operations and bytes by `operation kind`, summed over a list of recorded calls. */
export function summarize(operations: readonly RecordedOperation[]): Map<string, { count: number; bytes: number }> {
  const summary = new Map<string, { count: number; bytes: number }>();
  for (const entry of operations) {
    const label = `${entry.operation} ${entry.kind}`;
    const current = summary.get(label) ?? { count: 0, bytes: 0 };
    current.count += 1;
    current.bytes += entry.bytes;
    summary.set(label, current);
  }
  return summary;
}
