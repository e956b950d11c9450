import { closeSync, fsync, openSync } from 'node:fs';

/**
 * The file store's fsyncs (file.ts): of a temp file before it becomes an object, and of a
 * directory after names in it were linked, renamed or removed. Only the fsync itself goes
 * through the thread pool; the open and close are synchronous calls of microseconds.
 */

/** An fsync of `fd` through the thread pool. */
export function syncFile(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fsync(fd, (error) => (error ? reject(error) : resolve())));
}

async function fsyncDirectoryNow(directory: string): Promise<void> {
  const fd = openSync(directory, 'r');
  try {
    await syncFile(fd);
  } finally {
    closeSync(fd);
  }
}

/** Per directory: the callers waiting for the fsync that starts once the running one ends. */
const queued = new Map<string, Array<{ resolve: () => void; reject: (error: unknown) => void }>>();

/**
 * An fsync of `directory`: the names linked, renamed or removed in it before the call are on
 * disk once it resolves. Calls for one directory share fsyncs (a group commit): with none
 * running, the call starts one; while one runs, which may have started before the caller's
 * change, the caller waits for the next one, which starts when the running one ends and
 * serves every caller that came meanwhile. So a directory has at most one fsync running and
 * one waiting, however many puts in it are in flight, and each caller's change is covered by
 * an fsync that started after it. A failed fsync fails every caller it served.
 */
export function syncDirectory(directory: string): Promise<void> {
  const waiting = queued.get(directory);
  if (waiting) {
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  }
  queued.set(directory, []);
  return runFrom(directory);
}

/** Runs an fsync of `directory`, then the one its queued callers wait for, if any. */
async function runFrom(directory: string): Promise<void> {
  try {
    await fsyncDirectoryNow(directory);
  } finally {
    const waiting = queued.get(directory) ?? [];
    if (waiting.length === 0) {
      queued.delete(directory);
    } else {
      queued.set(directory, []);
      runFrom(directory).then(
        () => {
          for (const waiter of waiting) waiter.resolve();
        },
        (error: unknown) => {
          for (const waiter of waiting) waiter.reject(error);
        },
      );
    }
  }
}
