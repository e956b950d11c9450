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
