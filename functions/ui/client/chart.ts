/**
 * The session view's charts, one bar per turn loaded, oldest on the left, each with its axes
 * (the scale's top and the first and last turn) and a legend.
 */
import { $, add, el, svg } from './dom.ts';
import { counted, usageText } from './format.ts';

/** The chart in `box`: the SVG bars between their axis labels, and the legend (swatch class, text). */
function frame(box: HTMLElement, turns: any[], bars: SVGElement, top: string, legend: [string, string][]): void {
  if (turns.length === 0) {
    box.replaceChildren(el('p', { class: 'muted' }, 'No turns yet.'));
    return;
  }
  box.replaceChildren(
    el(
      'div',
      { class: 'chart' },
      el('div', { class: 'axis-y' }, el('span', {}, top), el('span', {}, '0')),
      bars,
      el(
        'div',
        { class: 'axis-x' },
        el('span', {}, `turn ${turns[0].turn}`),
        el('span', {}, `turn ${turns.at(-1).turn}`),
      ),
    ),
    el(
      'ul',
      { class: 'legend' },
      ...legend.map(([swatch, text]) =>
        el('li', {}, el('span', { class: `swatch ${swatch}`, 'aria-hidden': 'true' }), text),
      ),
    ),
  );
}

/**
 * A prompt bar's title: a turn running has no prompt yet, one closed before it stored its prompt
 * (cancelled while it ran) none, and a reuse the API does not know (null: the turn before stored no prompt, or was not
 * read with it) is not a 0.
 */
function promptTitle(turn: any, size: number, reused: number): string {
  if (typeof turn.context?.prompt_chars !== 'number') {
    const open = turn.status === 'queued' || turn.status === 'in_progress';
    return `turn ${turn.turn}: ${open ? 'no prompt yet' : 'no prompt stored'}`;
  }
  const known = turn.prefix_reused_chars == null ? 'reuse not known' : `${reused} reused`;
  return `turn ${turn.turn}: ${counted(size, 'char')}, ${known}`;
}

/** Prompt size (grey) and the part reused from the previous prompt (blue): epoch boundaries stand out. */
export function renderPromptChart(newestFirst: any[]): void {
  const turns = [...newestFirst].reverse();
  const width = 6;
  const height = 80;
  const max = Math.max(1, ...turns.map((turn) => turn.context?.prompt_chars ?? 0));
  const epochs = turns.filter(
    (turn, index) =>
      index > 0 &&
      turn.prefix_reused_chars !== null &&
      turn.prefix_reused_chars < (turns[index - 1].context?.prompt_chars ?? 0),
  ).length;
  const chart = svg('svg', {
    viewBox: `0 0 ${turns.length * width} ${height}`,
    preserveAspectRatio: 'none',
    role: 'img',
    'aria-label':
      `Prompt size of ${counted(turns.length, 'turn')} (grey) and the part reused from the previous turn (blue); ` +
      `${counted(epochs, 'turn')} reused less than the previous prompt.`,
  });
  turns.forEach((turn, index) => {
    const size = turn.context?.prompt_chars ?? 0;
    const reused = Math.min(size, turn.prefix_reused_chars ?? 0);
    const h = (size / max) * height;
    const r = (reused / max) * height;
    add(
      chart,
      svg(
        'rect',
        { x: index * width, y: height - h, width: width - 1, height: h, class: 'bar-total' },
        svg('title', {}, promptTitle(turn, size, reused)),
      ),
      svg('rect', { x: index * width, y: height - r, width: width - 1, height: r, class: 'bar-reused' }),
    );
  });
  frame($('strip-chart'), turns, chart, `${max.toLocaleString('en')} ${max === 1 ? 'char' : 'chars'}`, [
    ['swatch-total', 'prompt size'],
    ['swatch-reused', 'reused from the previous prompt'],
  ]);
}

/** One bar per turn: its cost against the costliest (green), its input's cache-read share (blue). */
export function renderCostChart(newestFirst: any[]): void {
  const turns = [...newestFirst].reverse();
  const height = 60;
  const max = Math.max(1e-12, ...turns.map((turn) => turn.usage?.cost_usd ?? 0));
  const chart = svg('svg', {
    viewBox: `0 0 ${Math.max(1, turns.length) * 6} ${height}`,
    preserveAspectRatio: 'none',
    role: 'img',
    'aria-label': `Cost and cache-read share of ${counted(turns.length, 'turn')}`,
  });
  const bar = (x: number, fraction: number, kind: string, text: string) =>
    add(
      chart,
      svg(
        'rect',
        { x, y: height * (1 - fraction), width: 2.5, height: height * fraction, class: kind },
        svg('title', {}, text),
      ),
    );
  turns.forEach((turn, index) => {
    const usage = turn.usage;
    if (!usage) return;
    const text = `turn ${turn.turn}${usageText(usage)}`;
    bar(index * 6, usage.cost_usd === null ? 0 : usage.cost_usd / max, 'bar-cost', text);
    bar(index * 6 + 3, usage.input_tokens > 0 ? usage.cached_input_tokens / usage.input_tokens : 0, 'bar-cache', text);
  });
  const costliest = max > 1e-12 ? `$${max.toFixed(6)}` : '$0';
  // Turns whose model has no price cost null, not $0: a chart of such turns alone says so.
  const spent = turns.filter((turn) => turn.usage);
  const unpriced = spent.length > 0 && spent.every((turn) => turn.usage.cost_usd === null);
  frame($('cost-chart'), turns, chart, `${unpriced ? 'no price' : costliest} · 100%`, [
    ['swatch-cost', unpriced ? 'cost (unknown: no turn has a price)' : `cost (top: the costliest turn, ${costliest})`],
    ['swatch-cache', 'cache-read share of the input (top: 100%)'],
  ]);
}
