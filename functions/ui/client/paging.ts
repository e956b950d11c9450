/** Lists that load a page at a time as their end scrolls into view (IntersectionObserver). */
import { add } from './dom.ts';
import { keepLoader, report } from './view.ts';

/** Calls `load` whenever `sentinel` scrolls into view, until it returns false or is stopped. */
export function onScrollEnd(sentinel: HTMLElement, load: () => Promise<boolean>): () => void {
  let busy = false;
  let stopped = false;
  const observer = new IntersectionObserver(async (entries) => {
    if (!entries.some((entry) => entry.isIntersecting) || busy || stopped) return;
    busy = true;
    let more = false;
    try {
      more = await load();
    } catch (error) {
      report(error);
    } finally {
      busy = false;
    }
    if (!more || stopped) stop();
    else {
      // Still in view (a short page): ask again.
      observer.unobserve(sentinel);
      observer.observe(sentinel);
    }
  });
  const stop = () => {
    stopped = true;
    observer.disconnect();
  };
  observer.observe(sentinel);
  return stop;
}

/**
 * Loads pages into `list` while `sentinel` scrolls into view: `fetchPage(cursor)` gives a
 * page's rows and the next cursor (null at the end).
 */
export function paged(
  list: HTMLElement,
  sentinel: HTMLElement,
  noun: string,
  fetchPage: (cursor: string | null) => Promise<{ rows: Node[]; next: string | null }>,
): void {
  list.replaceChildren();
  let cursor: string | null = null;
  sentinel.textContent = 'Loading…';
  keepLoader(
    onScrollEnd(sentinel, async () => {
      const page = await fetchPage(cursor);
      add(list, ...page.rows);
      cursor = page.next;
      sentinel.textContent = cursor === null ? `${list.children.length} ${noun}` : `Scroll for more ${noun}…`;
      return cursor !== null;
    }),
  );
}

/** A fully loaded list's sentinel ("12 turns") counted again after rows came or went. */
export function recount(list: HTMLElement, sentinel: HTMLElement, noun: string): void {
  if (new RegExp(`^\\d+ ${noun}$`).test(sentinel.textContent ?? ''))
    sentinel.textContent = `${list.children.length} ${noun}`;
}
