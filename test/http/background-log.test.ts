import { describe, expect, it } from 'vitest';
import { createOutsideServices } from '../../functions/app.ts';
import { NotFoundError } from '../../lib/errors.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { TOKEN } from './http-suite.ts';

// Work left running after a response (a pack, an index refresh, a pickup of the queue) meets a
// session deleted meanwhile as a matter of course: that is one routine line, not a failure with its stack.

describe('work after a response that throws', () => {
  it('is one routine line when its session was deleted meanwhile, and a failure with its error otherwise', async () => {
    const logged: [string, unknown][] = [];
    const store = new MemoryStore();
    const services = createOutsideServices({
      store: () => store,
      log: (message, details) => logged.push([message, details]),
      info: (message) => logged.push([message, 'info']),
    })({ API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' }, () => undefined);
    services.background(Promise.reject(new NotFoundError('session gone not found', { id: 'gone' })));
    const broken = new Error('the disk is full');
    services.background(Promise.reject(broken));
    await expect.poll(() => logged.length).toBe(2);
    expect(logged).toEqual([
      ['tailgate: a background task stopped: session gone not found', 'info'],
      ['tailgate: background task failed', broken],
    ]);
  });
});
