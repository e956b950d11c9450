import type { CacheRun } from './prompt-cache.ts';

const COLORS: Record<string, string> = {
  none: '#7f7f7f',
  shorten_tools: '#e6862e',
  shorten_tools_epoch: '#1f6fd1',
  shorten_tools_epoch_increment: '#1a9b4b',
  clear_tool_uses: '#c2388f',
};

const WIDTH = 960;
const PANEL_HEIGHT = 260;
const MARGIN = { left: 70, right: 20, top: 40, bottom: 40 };
const LEGEND_HEIGHT = 24 * 5 + 20;

/**
 * The prompt-cache chart as a standalone SVG (no dependencies): per model call, the prompt
 * size (log scale) and the share of it that is a byte-identical prefix of the previous
 * prompt, one line per strategy.
 */
export function promptCacheChart(runs: readonly CacheRun[], title: string): string {
  const turns = Math.max(...runs.map((run) => run.turns.length));
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (index: number) => MARGIN.left + (turns <= 1 ? 0 : (index / (turns - 1)) * plotWidth);
  const sizes = runs.flatMap((run) => run.turns.map((turn) => turn.size)).filter((size) => size > 0);
  const low = 10 ** Math.floor(Math.log10(Math.min(...sizes)));
  const high = 10 ** Math.ceil(Math.log10(Math.max(...sizes)));
  const sizeY = (size: number) =>
    MARGIN.top +
    plotHeight -
    ((Math.log10(Math.max(size, low)) - Math.log10(low)) / (Math.log10(high) - Math.log10(low))) * plotHeight;
  const shareTop = PANEL_HEIGHT;
  const shareY = (share: number) => shareTop + MARGIN.top + plotHeight - share * plotHeight;

  const parts: string[] = [];
  const height = PANEL_HEIGHT * 2 + LEGEND_HEIGHT;
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" ` +
      `font-family="sans-serif" font-size="12">`,
  );
  parts.push(`<rect width="100%" height="100%" fill="#ffffff"/>`);
  parts.push(
    `<text x="${WIDTH / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
  );

  // Panel 1: prompt size, log scale.
  parts.push(
    `<text x="${MARGIN.left}" y="${MARGIN.top - 8}" font-weight="bold">Prompt size per model call (bytes, log ` +
      `scale)</text>`,
  );
  for (let decade = low; decade <= high; decade *= 10) {
    const y = sizeY(decade);
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" ` +
        `stroke="#dddddd"/>`,
    );
    parts.push(
      `<text x="${MARGIN.left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${formatBytes(decade)}</text>`,
    );
  }
  // Panel 2: reusable share.
  parts.push(
    `<text x="${MARGIN.left}" y="${shareTop + MARGIN.top - 8}" font-weight="bold">Reusable share per model call ` +
      `(common byte prefix with the previous prompt / prompt size)</text>`,
  );
  for (const share of [0, 0.25, 0.5, 0.75, 1]) {
    const y = shareY(share);
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" ` +
        `stroke="#dddddd"/>`,
    );
    parts.push(
      `<text x="${MARGIN.left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${Math.round(share * 100)}%</text>`,
    );
  }
  for (const panelTop of [0, shareTop]) {
    const axisY = panelTop + MARGIN.top + plotHeight;
    parts.push(`<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${axisY}" y2="${axisY}" stroke="#333333"/>`);
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left}" y1="${panelTop + MARGIN.top}" y2="${axisY}" stroke="#333333"/>`,
    );
    const step = niceStep(turns);
    for (let tick = 0; tick < turns; tick += step) {
      parts.push(`<text x="${x(tick).toFixed(1)}" y="${axisY + 16}" text-anchor="middle">${tick}</text>`);
    }
    parts.push(
      `<text x="${WIDTH - MARGIN.right}" y="${axisY + 32}" text-anchor="end">model call (turn) of the simulated ` +
        `session</text>`,
    );
  }
  for (const run of runs) {
    const color = COLORS[run.name] ?? '#000000';
    const sizePoints = run.turns
      .map((turn, index) => `${x(index).toFixed(1)},${sizeY(turn.size).toFixed(1)}`)
      .join(' ');
    parts.push(`<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${sizePoints}"/>`);
    const sharePoints = run.turns
      .map(
        (turn, index) => `${x(index).toFixed(1)},${shareY(turn.size === 0 ? 0 : turn.reusable / turn.size).toFixed(1)}`,
      )
      .join(' ');
    parts.push(
      `<polyline fill="none" stroke="${color}" stroke-width="1" stroke-opacity="0.8" points="${sharePoints}"/>`,
    );
  }
  const legendTop = PANEL_HEIGHT * 2 + 10;
  runs.forEach((run, index) => {
    const y = legendTop + index * 24;
    const color = COLORS[run.name] ?? '#000000';
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + 30}" y1="${y + 8}" y2="${y + 8}" stroke="${color}" ` +
        `stroke-width="3"/>`,
    );
    const totals = run.totals;
    parts.push(
      `<text x="${MARGIN.left + 40}" y="${y + 12}">${escapeXml(run.label)}: ${formatBytes(totals.bytesSent)} ` +
        `sent, ${(totals.reusableShare * 100).toFixed(1)}% reusable, max prompt ` +
        `${formatBytes(totals.maxPromptBytes)}</text>`,
    );
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

function niceStep(count: number): number {
  const raw = count / 10;
  const power = 10 ** Math.floor(Math.log10(Math.max(1, raw)));
  for (const factor of [1, 2, 5, 10]) if (power * factor >= raw) return Math.max(1, power * factor);
  return Math.max(1, Math.ceil(raw));
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(bytes >= 1e10 ? 0 : 1)} GB`;
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(bytes >= 1e7 ? 0 : 1)} MB`;
  if (bytes >= 1e3) return `${(bytes / 1e3).toFixed(bytes >= 1e4 ? 0 : 1)} kB`;
  return `${Math.round(bytes)} B`;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
