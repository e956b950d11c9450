import { type EpochSweep, paretoFront, pointName, type SweepPoint } from './epoch-sweep.ts';

const COLORS: Record<SweepPoint['strategy'], string> = {
  shorten_tools_epoch: '#1f6fd1',
  shorten_tools_epoch_increment: '#1a9b4b',
};

const PANEL_WIDTH = 480;
const HEIGHT = 420;
const MARGIN = { left: 70, right: 20, top: 50, bottom: 90 };

/**
 * The epoch sweep as a standalone SVG: one panel per provider's billing model, each point a
 * setting (total input cost against mean prompt size), the Pareto front joined by a line and
 * labelled, the defaults ringed.
 */
export function epochSweepChart(sweep: EpochSweep, title: string): string {
  const panels: { title: string; cost: (point: SweepPoint) => number }[] = [
    { title: 'Anthropic (breakpoints, 20-block lookback)', cost: (point) => point.anthropic.cost },
    { title: 'OpenAI (automatic prefix, 128-token steps)', cost: (point) => point.openai.cost },
  ];
  const width = PANEL_WIDTH * panels.length;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${HEIGHT}" viewBox="0 0 ${width} ${HEIGHT}" ` +
      'font-family="sans-serif" font-size="11">',
    '<rect width="100%" height="100%" fill="#ffffff"/>',
    `<text x="${width / 2}" y="18" text-anchor="middle" font-size="14" font-weight="bold">${title}</text>`,
  ];
  for (const [index, panel] of panels.entries()) parts.push(...drawPanel(sweep.points, panel, index * PANEL_WIDTH));
  const legendY = HEIGHT - 30;
  for (const [index, strategy] of (Object.keys(COLORS) as SweepPoint['strategy'][]).entries()) {
    const x = MARGIN.left + index * 260;
    parts.push(`<circle cx="${x}" cy="${legendY}" r="4" fill="${COLORS[strategy]}"/>`);
    parts.push(`<text x="${x + 10}" y="${legendY + 4}">${strategy}</text>`);
  }
  parts.push(
    `<text x="${MARGIN.left}" y="${legendY + 22}">` +
      'ringed: defaults (t50/s20); line: Pareto front; tN/sM = threshold N, epoch size M</text>',
  );
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

function drawPanel(
  points: readonly SweepPoint[],
  panel: { title: string; cost: (point: SweepPoint) => number },
  left: number,
): string[] {
  const plotWidth = PANEL_WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const sizes = points.map((point) => point.meanPromptTokens);
  const costs = points.map(panel.cost);
  const [sizeLow, sizeHigh] = padded(Math.min(...sizes), Math.max(...sizes));
  const [costLow, costHigh] = padded(Math.min(...costs), Math.max(...costs));
  const x = (size: number) => left + MARGIN.left + ((size - sizeLow) / (sizeHigh - sizeLow)) * plotWidth;
  const y = (cost: number) => MARGIN.top + plotHeight - ((cost - costLow) / (costHigh - costLow)) * plotHeight;
  const bottom = MARGIN.top + plotHeight;
  const plotLeft = left + MARGIN.left;
  const plotRight = plotLeft + plotWidth;
  const parts = [
    `<text x="${plotLeft}" y="${MARGIN.top - 12}" font-weight="bold">${panel.title}</text>`,
    `<line x1="${plotLeft}" x2="${plotRight}" y1="${bottom}" y2="${bottom}" stroke="#333333"/>`,
    `<line x1="${plotLeft}" x2="${plotLeft}" y1="${MARGIN.top}" y2="${bottom}" stroke="#333333"/>`,
    `<text x="${plotRight}" y="${bottom + 32}" text-anchor="end">mean prompt per model call (thousand tokens)</text>`,
    `<text transform="translate(${left + 14} ${MARGIN.top + plotHeight / 2}) rotate(-90)" text-anchor="middle">` +
      'input cost (million base-price tokens)</text>',
  ];
  for (let tick = 0; tick <= 4; tick++) {
    const size = sizeLow + ((sizeHigh - sizeLow) * tick) / 4;
    const cost = costLow + ((costHigh - costLow) * tick) / 4;
    parts.push(
      `<text x="${x(size).toFixed(1)}" y="${bottom + 16}" text-anchor="middle">${(size / 1e3).toFixed(0)}</text>`,
    );
    const gridY = y(cost).toFixed(1);
    parts.push(`<line x1="${plotLeft}" x2="${plotRight}" y1="${gridY}" y2="${gridY}" stroke="#eeeeee"/>`);
    parts.push(
      `<text x="${plotLeft - 6}" y="${(y(cost) + 4).toFixed(1)}" text-anchor="end">${(cost / 1e6).toFixed(1)}</text>`,
    );
  }
  const front = paretoFront(points, panel.cost);
  const line = front.map((point) => `${x(point.meanPromptTokens).toFixed(1)},${y(panel.cost(point)).toFixed(1)}`);
  parts.push(`<polyline fill="none" stroke="#999999" stroke-dasharray="4 3" points="${line.join(' ')}"/>`);
  for (const point of points) {
    const cx = x(point.meanPromptTokens).toFixed(1);
    const cy = y(panel.cost(point)).toFixed(1);
    parts.push(`<circle cx="${cx}" cy="${cy}" r="4" fill="${COLORS[point.strategy]}"/>`);
    if (point.isDefault)
      parts.push(`<circle cx="${cx}" cy="${cy}" r="8" fill="none" stroke="${COLORS[point.strategy]}"/>`);
  }
  // Labels alternate above and below their point, so neighbours on the front do not overlap.
  for (const [index, point] of front.entries()) {
    const dy = index % 2 === 0 ? -7 : 15;
    const labelX = (x(point.meanPromptTokens) + 6).toFixed(1);
    const labelY = (y(panel.cost(point)) + dy).toFixed(1);
    parts.push(`<text x="${labelX}" y="${labelY}">${pointName(point)}</text>`);
  }
  return parts;
}

function padded(low: number, high: number): [number, number] {
  const margin = (high - low) * 0.08 || Math.max(1, low * 0.05);
  return [low - margin, high + margin];
}
