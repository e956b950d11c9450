import { format } from 'node:util';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { createErrorHandler } from '../../functions/error-handler.ts';
import { sweepQueuedSessions } from '../../functions/queue-sweep.ts';
import { reportSweep } from '../../functions/retention.ts';
import { scheduleWebhooks } from '../../functions/webhooks.ts';
import { TailgateError } from '../../lib/errors.ts';
import { loggable, logToConsole } from '../../lib/loggable.ts';
import { logContext } from '../../lib/session/log/context.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { viewPolicy } from '../../lib/turn/view-policy.ts';

// The Worker's bundle keeps no class names (wrangler.toml, `keep_names`): a class is named as
// the minifier renamed it, as `Ao` here, and only its `name` says what it is. A failure's log
// line names it by that `name` (lib/loggable.ts), here in workerd as on Node and Deno.
class Ao extends TailgateError {
  constructor(details?: unknown) {
    super('storage_error', 'R2 get sessions/s1/config.json failed: bucket gone', details);
    this.name = 'StorageError';
  }
}

/** What console.error wrote while `run` ran, each call's arguments as the console formats them. */
async function consoleErrors(run: (lines: readonly string[]) => Promise<unknown>): Promise<string[]> {
  const error = console.error;
  const lines: string[] = [];
  console.error = (...args: unknown[]) => void lines.push(format(...args));
  try {
    await run(lines);
  } finally {
    console.error = error;
  }
  return lines;
}

describe('loggable', () => {
  it("names an error by its `name`, with its stack's frames, its fields and its cause", () => {
    const line = String(loggable(new Error('the sweep failed', { cause: new Ao({ key: 'k' }) })));
    const [head, ...rest] = line.split('\n');
    expect(head).toBe('Error: the sweep failed');
    expect(rest[0]).toMatch(/^\s+at /);
    expect(line).toContain('[cause]: StorageError: R2 get sessions/s1/config.json failed: bucket gone\n    at ');
    expect(line).toContain('\n{"code":"storage_error","details":{"key":"k"}}');
    expect(line).not.toMatch(/\bAo\b/);
  });

  it('leaves a value that is no Error as it is', () => {
    const value = { reason: 'not an error' };
    expect(loggable(value)).toBe(value);
    expect(loggable('text')).toBe('text');
    expect(loggable(undefined)).toBeUndefined();
  });

  it("shows a field's nesting to depth 2 and its long text cut, as the runtimes' display does", () => {
    // A provider SDK's error carries the request it made: the prompt, which a log line must not copy whole.
    const error = Object.assign(new Error('bad request'), {
      statusCode: 400,
      requestBodyValues: { model: 'm', input: [{ role: 'user', content: 'secret words '.repeat(100) }] },
    });
    const fields = String(loggable(error)).split('\n').at(-1);
    expect(fields).toBe('{"statusCode":400,"requestBodyValues":{"model":"m","input":["[Object]"]}}');
    const long = String(loggable(new Ao({ message: 'x'.repeat(500) })))
      .split('\n')
      .at(-1);
    expect(long).toBe(`{"code":"storage_error","details":{"message":"${'x'.repeat(200)}…"}}`);
  });

  it('shows a cause that is no Error as its fields, not as [object Object]', () => {
    const line = String(loggable(new Error('the call failed', { cause: { status: 503, body: 'y'.repeat(300) } })));
    expect(line.split('\n').at(-1)).toBe(`[cause]: {"status":503,"body":"${'y'.repeat(200)}…"}`);
    expect(
      String(loggable(new Error('the call failed', { cause: 'timeout' })))
        .split('\n')
        .at(-1),
    ).toBe('[cause]: timeout');
  });

  it('shows bytes by their length and a date as its time, not entry by entry', () => {
    const error = Object.assign(new Error('bad answer'), {
      body: new Uint8Array(1_000_000),
      at: new Date('2026-01-01T00:00:00Z'),
    });
    expect(String(loggable(error)).split('\n').at(-1)).toBe(
      '{"body":"[1000000 bytes]","at":"2026-01-01T00:00:00.000Z"}',
    );
  });

  it('names an error inside a field by its name and message, not as the empty object of its enumerable fields', () => {
    const inner = Object.assign(new TypeError('socket hang up'), { code: 'ECONNRESET' });
    const error = new Ao({ key: 'k', error: inner });
    expect(JSON.parse(String(loggable(error)).split('\n').at(-1)!).details).toEqual({
      key: 'k',
      error: { name: 'TypeError', message: 'socket hang up', code: 'ECONNRESET' },
    });
  });

  it('shows at most 100 entries of a long array or object, counting the rest', () => {
    const error = Object.assign(new Error('bad answer'), {
      ids: Array.from({ length: 1_000_000 }, (_, index) => index),
      byId: Object.fromEntries(Array.from({ length: 1000 }, (_, index) => [`k${index}`, index])),
    });
    const fields = JSON.parse(String(loggable(error)).split('\n').at(-1)!);
    expect(fields.ids).toHaveLength(101);
    expect(fields.ids.slice(98)).toEqual([98, 99, '… 999900 more']);
    expect(Object.keys(fields.byId)).toHaveLength(101);
    expect(Object.entries(fields.byId).slice(99)).toEqual([
      ['k99', 99],
      ['…', '900 more'],
    ]);
  });

  it('shows a cause that is long text cut at 200 characters, as text in a field is', () => {
    const line = String(loggable(new Error('the call failed', { cause: 'z'.repeat(300) })));
    expect(line.split('\n').at(-1)).toBe(`[cause]: ${'z'.repeat(200)}…`);
  });

  it('marks a field whose getter throws and shows the rest, at any depth', () => {
    const throwing = {
      enumerable: true,
      get: (): never => {
        throw new Error('gone');
      },
    };
    const error = Object.defineProperty(Object.assign(new Error('bad answer'), { status: 500 }), 'body', throwing);
    expect(String(loggable(error)).split('\n').at(-1)).toBe('{"status":500,"body":"[getter threw]"}');
    const inner = Object.defineProperty({ key: 'k' }, 'request', throwing);
    expect(
      String(loggable(new Ao(inner)))
        .split('\n')
        .at(-1),
    ).toBe('{"code":"storage_error","details":{"key":"k","request":"[getter threw]"}}');
    const message = Object.defineProperty(new Error(), 'message', throwing);
    expect(String(loggable(message)).split('\n')[0]).toBe('Error: [getter threw]');
    const holder = Object.defineProperty({ key: 'sessions/s1/inbox/n', error: new Ao() }, 'other', throwing);
    expect(loggable(holder)).toMatchObject({ key: 'sessions/s1/inbox/n', other: '[getter threw]' });
  });

  it('names fields that do not serialize instead of throwing', () => {
    const error = new Ao({ big: 1n });
    expect(String(loggable(error)).split('\n').at(-1)).toBe('{code, details}');
  });
});

describe("a failure's log line", () => {
  const names = (lines: string[]) => lines.map((line) => line.split('\n')[0]);

  it("the error handler's default log names the error by its `name`", async () => {
    const app = new Hono();
    app.onError(createErrorHandler());
    app.get('/', () => {
      throw new Ao();
    });
    const lines = await consoleErrors(async () => app.request('/'));
    expect(names(lines)).toEqual([
      'tailgate: storage_error StorageError: R2 get sessions/s1/config.json failed: bucket gone',
    ]);
  });

  it("the app's default log names it too, after the message and its request id", async () => {
    const app = createApp({
      store: () => {
        throw new Ao();
      },
      readEnvironment: () => ({ API_TOKEN: 'token' }),
    });
    let requestId: string | null = null;
    const lines = await consoleErrors(async () => {
      const response = await app.request('/v1/sessions/s1', { headers: { authorization: 'Bearer token' } });
      requestId = response.headers.get('x-request-id');
    });
    expect(requestId).toMatch(/^req_/);
    expect(names(lines)).toEqual([
      `tailgate: storage_error (${requestId}) StorageError: R2 get sessions/s1/config.json failed: bucket gone`,
    ]);
  });

  it("the app's inbox warning, its error beside the notice's key, names it too", async () => {
    // As functions/services.ts logs an inbox warning: `{key, error}`.
    const lines = await consoleErrors(async () =>
      logToConsole('tailgate inbox: notice not moved', { key: 'sessions/s1/inbox/n', error: new Ao() }),
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('sessions/s1/inbox/n');
    expect(lines[0]).toContain('StorageError: R2 get sessions/s1/config.json failed: bucket gone');
    expect(lines[0]).not.toMatch(/\bAo\b/);
  });

  it('so do the sweeps, the webhook delivery loop and the session log', async () => {
    const lines = await consoleErrors(async (logged) => {
      await reportSweep(Promise.reject(new Ao()));
      await reportSweep(
        Promise.resolve({ checked: 1, deleted: [], orphans: 0, more: false, failed: [{ id: 's1', error: new Ao() }] }),
      );
      await sweepQueuedSessions(() => {
        throw new Ao();
      });
      const loop = scheduleWebhooks(async () => {
        throw new Ao();
      });
      await expect.poll(() => logged.length).toBe(4);
      loop.stop();
      const log = logContext(new MemoryStore(), { viewPolicy }).log;
      log('tailgate: a session log failure', new Ao());
      log('tailgate: a session log line without details');
    });
    expect(names(lines)).toEqual([
      'tailgate: retention sweep failed StorageError: R2 get sessions/s1/config.json failed: bucket gone',
      'tailgate: retention of session s1 failed StorageError: R2 get sessions/s1/config.json failed: bucket gone',
      'tailgate: queue sweep failed StorageError: R2 get sessions/s1/config.json failed: bucket gone',
      'tailgate: webhook delivery failed StorageError: R2 get sessions/s1/config.json failed: bucket gone',
      'tailgate: a session log failure StorageError: R2 get sessions/s1/config.json failed: bucket gone',
      'tailgate: a session log line without details',
    ]);
  });
});
