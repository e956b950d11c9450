/**
 * Lists that load a page at a time: the first at once, the next ones as their end scrolls into
 * view (IntersectionObserver), or when a "more" button after them is pressed.
 */
import { api } from './api.ts';
import { add, el } from './dom.ts';
import { counted } from './format.ts';
import { keepLoader, showLoadError } from './view.ts';

/**
 * Calls `load` whenever `sentinel` scrolls into view, until it returns false or is stopped. A
 * load that failed says so in `sentinel` (`what()` could not be loaded) with a Retry button,
 * which loads again.
 */
export function onScrollEnd(sentinel: HTMLElement, load: () => Promise<boolean>, what: () => string): () => void {
  let busy = false;
  let stopped = false;
  const observer = new IntersectionObserver(async (entries) => {
    if (!entries.some((entry) => entry.isIntersecting) || busy || stopped) return;
    busy = true;
    let more: boolean;
    try {
      more = await load();
    } catch (error) {
      observer.unobserve(sentinel);
      if (!stopped)
        showLoadError(sentinel, what(), error, () => {
          sentinel.textContent = 'Loading…';
          observer.observe(sentinel);
        });
      return;
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
 * Loads pages into `list`: the first at once, the next ones while `sentinel` scrolls into view
 * (an observer's first report may wait on a renderer the browser throttles, as a tab in the
 * background or just reloaded: the first page does not). `fetchPage(cursor)` gives a page's
 * records and the next cursor (null at the end); `rowsOf(records)` makes their rows, and does
 * whatever else showing them means (charts, flags), only for a page arriving while the view that
 * asked for it shows: one arriving once the view changed (`stopLoaders`) changes nothing. `noun`
 * names a row ("turn"); a page that failed to load says so in `sentinel`, with a Retry button.
 */
export function paged<Record>(
  list: HTMLElement,
  sentinel: HTMLElement,
  noun: string,
  fetchPage: (cursor: string | null) => Promise<{ records: Record[]; next: string | null }>,
  rowsOf: (records: Record[]) => Node[],
): void {
  list.replaceChildren();
  let cursor: string | null = null;
  let stopped = false;
  let stopScrolling: () => void = () => undefined;
  keepLoader(() => {
    stopped = true;
    stopScrolling();
  });
  const what = () => (cursor === null ? `The ${noun}s` : `More ${noun}s`);
  const load = async () => {
    const page = await fetchPage(cursor);
    if (stopped) return false;
    add(list, ...rowsOf(page.records));
    cursor = page.next;
    sentinel.textContent = cursor === null ? counted(list.children.length, noun) : `Scroll for more ${noun}s…`;
    return cursor !== null;
  };
  const first = () => {
    sentinel.textContent = 'Loading…';
    load().then(
      (more) => {
        if (more && !stopped) stopScrolling = onScrollEnd(sentinel, load, what);
      },
      (error) => {
        if (!stopped) showLoadError(sentinel, what(), error, first);
      },
    );
  };
  first();
}

/**
 * The pages of `path` (a listing answering `{[key]: [...], has_more, next_after}`, continued by
 * `after`) for `pagedByButton`: its `key` records as rows by `row`.
 */
export function pagesAfter(path: string, key: string, row: (record: any) => Node) {
  return async (after: string | null) => {
    const page = await api(after === null ? path : `${path}?after=${encodeURIComponent(after)}`);
    return { rows: page[key].map(row), next: page.has_more ? (page.next_after as string) : null };
  };
}

/** The load under way into a list: a page of an earlier one arriving late is dropped. */
const loading = new WeakMap<HTMLElement, object>();

/**
 * Shows the first page of `fetchPage(null)` in `list` (in place of what it held, once it came),
 * then, while there are more, a button labelled `label` in `more` that appends the next page.
 * A page arriving (or failing) after `list` was loaded again (or by another call) is dropped;
 * whether `list` shows this call's first page.
 */
export async function pagedByButton(
  list: HTMLElement,
  more: HTMLElement,
  label: string,
  fetchPage: (cursor: string | null) => Promise<{ rows: Node[]; next: string | null }>,
): Promise<boolean> {
  const mark = {};
  loading.set(list, mark);
  const load = async (cursor: string | null) => {
    const page = await fetchPage(cursor);
    if (loading.get(list) !== mark) return;
    if (cursor === null) list.replaceChildren(...page.rows);
    else add(list, ...page.rows);
    more.replaceChildren();
    const next = page.next;
    if (next === null) return;
    const button = el('button', { type: 'button' }, label) as HTMLButtonElement;
    // A page that failed to load says so in `more`, with a Retry button.
    const loadNext = () => load(next).catch((error) => showLoadError(more, label, error, () => void loadNext()));
    button.addEventListener('click', () => {
      button.disabled = true;
      void loadNext();
    });
    more.appendChild(button);
  };
  try {
    await load(null);
  } catch (error) {
    // A first page that failed after `list` was loaded again is dropped, as its rows would be.
    if (loading.get(list) === mark) throw error;
  }
  return loading.get(list) === mark;
}

/** A fully loaded list's sentinel ("12 turns") counted again after rows came or went. */
export function recount(list: HTMLElement, sentinel: HTMLElement, noun: string): void {
  if (new RegExp(`^\\d+ ${noun}s?$`).test(sentinel.textContent ?? ''))
    sentinel.textContent = counted(list.children.length, noun);
}
