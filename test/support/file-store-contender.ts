import { FileStore } from '../../lib/store/file.ts';

/**
 * One process contending for keys of a shared FileStore directory (test/store/file-store.test.ts):
 * `tsx file-store-contender.ts <dir> <name> <rounds> [writers]`. Each round races a create-only
 * put of `race/<round>`, then `writers` (default 1) concurrent If-Match increments of `counter`
 * (each retried until it lands), and prints one JSON line: the rounds it won and how many
 * increments it made.
 */
const [root, name, roundsText, writersText] = process.argv.slice(2);
const store = new FileStore(root!);
const won: number[] = [];
let increments = 0;

async function increment(): Promise<void> {
  for (;;) {
    const current = await store.get('counter');
    const value = current ? Number(new TextDecoder().decode(current.body)) : 0;
    const written = current
      ? await store.put('counter', String(value + 1), { ifMatch: current.etag })
      : await store.put('counter', '1', { onlyIfAbsent: true });
    if (written) break;
  }
  increments++;
}

for (let round = 0; round < Number(roundsText); round++) {
  if (
    await store.put(`race/${String(round).padStart(4, '0')}`, `${name} ${round}`, {
      onlyIfAbsent: true,
      metadata: { owner: name! },
    })
  )
    won.push(round);
  await Promise.all(Array.from({ length: Number(writersText ?? 1) }, increment));
}
console.log(JSON.stringify({ name, won, increments }));
