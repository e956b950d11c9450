import { cp } from 'node:fs/promises';
import { FileStore } from '../../lib/store/file.ts';
import type { ObjectStore } from '../../lib/store/object-store.ts';

/**
 * Copies every object of `from` into `to` (empty), body and metadata, so that a state set up
 * once can start many runs. The copies have new etags and upload times: set up the copy's
 * readers after it, not before.
 */
export async function copyObjects(from: ObjectStore, to: ObjectStore): Promise<void> {
  for (let cursor: string | undefined, more = true; more; ) {
    const page = await from.list('', cursor === undefined ? {} : { cursor });
    for (const info of page.objects) {
      const object = await from.get(info.key);
      if (object) await to.put(info.key, object.body, { metadata: object.metadata });
    }
    more = page.truncated;
    cursor = page.cursor;
  }
}

/**
 * Copies `from` into `to` (empty): a file store's directory as it is (its etags and lock files
 * with it), any other store object by object (copyObjects).
 */
export async function copyStore(from: ObjectStore, to: ObjectStore): Promise<void> {
  if (from instanceof FileStore && to instanceof FileStore) await cp(from.root, to.root, { recursive: true });
  else await copyObjects(from, to);
}
