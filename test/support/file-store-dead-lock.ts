import process from 'node:process';
import { processAlive } from '../../lib/store/file-format.ts';
import { FileStore } from '../../lib/store/file.ts';

/**
 * A Deno process with the servers' permissions meeting locks of the file store that another
 * process left (test/runtimes/deno-file-locks.test.ts): `file-store-dead-lock.ts <dir> <dead
 * pid> <live pid>`. Prints one JSON line: whether it takes each pid for a live process's, and
 * whether a delete and a put of keys whose locks the dead pid left went through (the lock
 * wait is 5 s, well under the 60 s after which any lock counts as stale).
 */
const [root, dead, live] = process.argv.slice(2);
const store = new FileStore(root!, { lockTimeoutMs: 5_000 });
const outcome = (write: Promise<unknown>) =>
  write.then(
    () => 'written',
    (error: unknown) => String(error),
  );
console.log(
  JSON.stringify({
    deadAlive: await processAlive(Number(dead)),
    liveAlive: await processAlive(Number(live)),
    deleted: await outcome(store.delete('k/deleted')),
    put: await outcome(store.put('k/put', 'after the dead lock')),
  }),
);
