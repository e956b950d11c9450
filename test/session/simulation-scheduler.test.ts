import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Scheduler } from '../support/simulation.ts';

// The simulation's scheduler (test/support/simulation.ts) moves fake timers while its work
// waits on them. A timer outside the simulation that re-arms itself for ever (a library's
// background loop, left running by another file in the same worker) must end the run with an
// error naming the cause, not keep it moving that timer until the test's timeout.
describe('the simulation scheduler', () => {
  let stop = false;
  beforeEach(() => {
    stop = false;
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    stop = true;
    vi.clearAllTimers();
    vi.useRealTimers();
  });

  it('runs work that waits on timers to its end', async () => {
    const scheduler = new Scheduler();
    const work = (async () => {
      for (let index = 0; index < 3; index++) await new Promise((resolve) => setTimeout(resolve, 5_000));
      await scheduler.gate();
      return 'done';
    })();
    expect(await scheduler.run(work)).toBe('done');
    expect(scheduler.steps).toBe(1);
  });

  // Work that takes turns of the event loop of its own (a receipt's hashing gives way every 8 ms,
  // so a loaded machine gives it many more turns) is still running: no timer moves meanwhile,
  // however many turns it takes, and a timer beside it (a running turn's stop check) is no loop.
  it('moves no timer while work runs on turns of the event loop of its own', async () => {
    const scheduler = new Scheduler();
    let fired = 0;
    const check = setInterval(() => fired++, 100);
    const work = (async () => {
      for (let turn = 0; turn < 20_000; turn++) await new Promise((resolve) => setImmediate(resolve));
      await scheduler.gate();
      clearInterval(check);
      return 'done';
    })();
    expect(await scheduler.run(work)).toBe('done');
    expect(fired).toBe(0);
  });

  it('fails, naming the cause, when a timer outside the simulation keeps re-arming itself', async () => {
    const loop = () => {
      if (!stop) setTimeout(async () => loop(), 5_000);
    };
    loop();
    await expect(new Scheduler().run(Promise.resolve('done'))).rejects.toThrow(
      /timers keep firing without a storage call/,
    );
  });
});
