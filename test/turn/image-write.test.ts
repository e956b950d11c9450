import { describe, expect, it } from 'vitest';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import type { Body, PutOptions } from '../../lib/store/object-store.ts';
import { runTurn } from '../../lib/turn/index.ts';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { turnWorld } from '../support/turn-world.ts';

describe('a turn whose image write is slow', () => {
  it('lands its record with a lease that has not run out already', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    let entered: () => void = () => undefined;
    const writing = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const landed: { lease: number; at: number }[] = [];
    class SlowBlobs extends MemoryStore {
      override async put(key: string, body: Body, options?: PutOptions) {
        if (key.includes('/blob/')) {
          entered();
          await released;
        }
        const text = typeof body === 'string' ? body : new TextDecoder().decode(body as Uint8Array);
        if (/\/turn\/.*\/\d+$/.test(key) && text.includes('lease_expires_at'))
          landed.push({ lease: Date.parse(JSON.parse(text).lease_expires_at), at: now });
        return super.put(key, body, options);
      }
    }
    const { sessions, services } = turnWorld(new SlowBlobs(), echoModel, {
      clock: () => new Date(now),
      leaseMs: 30_000,
    });
    await sessions.create({ id: 's' });
    const image = { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(64, 48)) };
    const turn = runTurn(services, 's', { input: [{ type: 'message', role: 'user', content: [image] }] });
    await writing;
    now += 31_000; // the blob write took longer than the lease
    release();
    await turn;
    expect(landed).toHaveLength(1);
    expect(landed[0]!.lease).toBeGreaterThan(landed[0]!.at);
  });
});

describe('a keyed turn with an image, asked again', () => {
  it('replays without writing its blob again', async () => {
    const blobPuts: string[] = [];
    class CountedBlobs extends MemoryStore {
      override async put(key: string, body: Body, options?: PutOptions) {
        if (key.includes('/blob/')) blobPuts.push(key);
        return super.put(key, body, options);
      }
    }
    const { sessions, services } = turnWorld(new CountedBlobs(), echoModel);
    await sessions.create({ id: 's' });
    const image = { type: 'input_image' as const, image_url: dataUrl('image/png', pngBytes(64, 48)) };
    const request = { input: [{ type: 'message' as const, role: 'user' as const, content: [image] }] };
    const first = await runTurn(services, 's', request, { idempotencyKey: 'k' });
    expect(blobPuts).toHaveLength(1);
    const again = await runTurn(services, 's', request, { idempotencyKey: 'k' });
    expect(again.output).toEqual(first.output);
    expect(blobPuts).toHaveLength(1);
  });
});
