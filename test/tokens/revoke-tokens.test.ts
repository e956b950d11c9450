import { describe, expect, it } from 'vitest';
import { SessionLog } from '../support/session-log.ts';
import { MemoryStore } from '../../lib/store/memory.ts';

describe('SessionLog token generation', () => {
  it('starts at 0, and concurrent revokes each bump it once without losing a config change', async () => {
    const log = new SessionLog(new MemoryStore());
    await log.create({ id: 's1', instructions: 'first' });
    expect((await log.tokenBinding('s1')).generation).toBe(0);
    const results = await Promise.all([
      log.revokeTokens('s1'),
      log.revokeTokens('s1'),
      log.update('s1', { instructions: 'second' }),
      log.revokeTokens('s1'),
    ]);
    expect(results.filter((result) => typeof result === 'number').sort()).toEqual([1, 2, 3]);
    expect((await log.tokenBinding('s1')).generation).toBe(3);
    expect((await log.get('s1')).instructions).toBe('second');
  });

  it('runs checkConfig on every config read, so a check can refuse the request', async () => {
    const store = new MemoryStore();
    await new SessionLog(store).create({ id: 's2' });
    const seen: string[] = [];
    const checked = new SessionLog(store, {
      checkConfig: (config) => {
        seen.push(config.id);
        if ((config.token_generation ?? 0) > 0) throw new Error('revoked');
      },
    });
    await checked.get('s2');
    await checked.append('s2', [{ type: 'message', role: 'user', content: 'hi' }]);
    expect(seen).toEqual(['s2', 's2']);
    await checked.revokeTokens('s2');
    await expect(checked.get('s2')).rejects.toThrow('revoked');
    await expect(checked.append('s2', [{ type: 'message', role: 'user', content: 'no' }])).rejects.toThrow('revoked');
    expect((await new SessionLog(store).get('s2')).counts.items).toBe(1);
  });

  it('refuses a missing session', async () => {
    await expect(new SessionLog(new MemoryStore()).revokeTokens('nope')).rejects.toMatchObject({ code: 'not_found' });
  });
});
