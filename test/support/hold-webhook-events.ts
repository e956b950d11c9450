import { writeFileSync } from 'node:fs';
import { FileStore } from '../../lib/store/file.ts';

/**
 * A preload (`node --import`) for test/runtimes/webhooks-kill.test.ts: with HOLD_WEBHOOK_MARKER
 * set, the put of a turn's event into the webhook outbox (not its intent, whose `body` is
 * empty) writes that file and never returns, so the test kills the server exactly between a
 * turn's `.done` and its event.
 */
const marker = process.env.HOLD_WEBHOOK_MARKER;
if (marker) {
  const put = FileStore.prototype.put;
  FileStore.prototype.put = function (this: FileStore, ...args: Parameters<FileStore['put']>) {
    const [key, body] = args;
    if (key.includes('webhooks/outbox/') && typeof body === 'string' && !body.includes('"body":""')) {
      writeFileSync(marker, key);
      return new Promise(() => {});
    }
    return put.apply(this, args);
  };
}
