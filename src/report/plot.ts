// --plot: bus bandwidth and time against size on log axes, one labelled line per op / algorithm.
export interface PlotPoint {
  readonly bytes: number;
  readonly busbwGBps: number;
  readonly timeUs: number;
}
export interface PlotSeries {
  readonly label: string;
  readonly points: readonly PlotPoint[];
}

const W = 900;
const PANEL_H = 300;
const M = { left: 80, right: 190, top: 40, bottom: 50 };
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function sizeLabel(b: number): string {
  for (const [u, n] of [["G", 2 ** 30], ["M", 2 ** 20], ["K", 2 ** 10]] as const) if (b >= n) return `${+(b / n).toFixed(1)}${u}`;
  return `${b}`;
}

/** Decades (or powers of two for sizes) spanning [lo, hi]. */
function ticks(lo: number, hi: number, base: number): number[] {
  const out: number[] = [];
  for (let e = Math.floor(Math.log(lo) / Math.log(base)); base ** e <= hi * 1.0001; e++) if (base ** e >= lo * 0.9999) out.push(base ** e);
  return out;
}

function panel(series: readonly PlotSeries[], y0: number, title: string, value: (p: PlotPoint) => number, unit: string, xs: [number, number]): string {
  // (Infinite bandwidth, bytes moved in no time, has no place on a log axis: left out.)
  const all = series.flatMap((s) => s.points.map(value)).filter((v) => v > 0 && Number.isFinite(v));
  const lo = all.length ? Math.min(...all) : 1;
  const hi = all.length ? Math.max(...all) : 10;
  const ylo = 10 ** Math.floor(Math.log10(lo));
  const yhi = 10 ** Math.ceil(Math.log10(hi * 1.0001));
  const plotW = W - M.left - M.right;
  const plotH = PANEL_H - M.top - M.bottom;
  const x = (b: number) => M.left + ((Math.log(b) - Math.log(xs[0])) / (Math.log(xs[1]) - Math.log(xs[0]) || 1)) * plotW;
  const y = (v: number) => y0 + M.top + plotH - ((Math.log(v) - Math.log(ylo)) / (Math.log(yhi) - Math.log(ylo) || 1)) * plotH;
  const parts: string[] = [];
  parts.push(`<text x="${M.left}" y="${y0 + M.top - 14}" font-size="15" font-weight="bold">${esc(title)}</text>`);
  parts.push(`<rect x="${M.left}" y="${y0 + M.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#444"/>`);
  const xt = ticks(xs[0], xs[1], 2).filter((_, i, a) => a.length <= 12 || i % Math.ceil(a.length / 12) === 0);
  for (const t of xt) {
    parts.push(`<line x1="${x(t).toFixed(1)}" y1="${y0 + M.top}" x2="${x(t).toFixed(1)}" y2="${y0 + M.top + plotH}" stroke="#ddd"/>`);
    parts.push(`<text x="${x(t).toFixed(1)}" y="${y0 + M.top + plotH + 18}" font-size="11" text-anchor="middle">${sizeLabel(t)}</text>`);
  }
  for (const t of ticks(ylo, yhi, 10)) {
    parts.push(`<line x1="${M.left}" y1="${y(t).toFixed(1)}" x2="${M.left + plotW}" y2="${y(t).toFixed(1)}" stroke="#ddd"/>`);
    parts.push(`<text x="${M.left - 8}" y="${(y(t) + 4).toFixed(1)}" font-size="11" text-anchor="end">${+t.toPrecision(3)}</text>`);
  }
  parts.push(`<text x="${M.left + plotW / 2}" y="${y0 + PANEL_H - 8}" font-size="12" text-anchor="middle">size (bytes)</text>`);
  parts.push(`<text transform="translate(18 ${y0 + M.top + plotH / 2}) rotate(-90)" font-size="12" text-anchor="middle">${esc(unit)}</text>`);
  const labels: { text: string; colour: string; ax: number; ay: number; y: number }[] = [];
  series.forEach((s, i) => {
    const c = COLOURS[i % COLOURS.length]!;
    const pts = s.points.filter((p) => value(p) > 0 && Number.isFinite(value(p)));
    if (pts.length === 0) return;
    const d = pts.map((p, k) => `${k ? "L" : "M"}${x(p.bytes).toFixed(1)},${y(value(p)).toFixed(1)}`).join(" ");
    parts.push(`<path data-series="${esc(s.label)}" d="${d}" fill="none" stroke="${c}" stroke-width="2"/>`);
    for (const p of pts) parts.push(`<circle cx="${x(p.bytes).toFixed(1)}" cy="${y(value(p)).toFixed(1)}" r="2.5" fill="${c}"/>`);
    const last = pts[pts.length - 1]!;
    labels.push({ text: s.label, colour: c, ax: x(last.bytes), ay: y(value(last)), y: y(value(last)) });
  });
  // Labels sit at the right end of their line, pushed apart so that none overlaps another.
  labels.sort((a, b) => a.ay - b.ay);
  const gap = 15;
  labels.forEach((l, i) => (l.y = Math.max(l.ay, i ? labels[i - 1]!.y + gap : -Infinity)));
  const bottom = y0 + M.top + plotH;
  for (let i = labels.length - 1; i >= 0; i--) labels[i]!.y = Math.min(labels[i]!.y, i === labels.length - 1 ? bottom : labels[i + 1]!.y - gap);
  const lx = M.left + plotW + 14;
  for (const l of labels) {
    parts.push(`<polyline points="${l.ax.toFixed(1)},${l.ay.toFixed(1)} ${(lx - 4).toFixed(1)},${l.y.toFixed(1)}" fill="none" stroke="${l.colour}" stroke-width="1"/>`);
    parts.push(`<text x="${lx.toFixed(1)}" y="${(l.y + 4).toFixed(1)}" font-size="12" fill="${l.colour}">${esc(l.text)}</text>`);
  }
  return parts.join("\n");
}

/** An SVG document with two panels: busbw (GB/s) and time (us) against size, log-log. */
export function plotSvg(title: string, series: readonly PlotSeries[]): string {
  const sizes = series.flatMap((s) => s.points.map((p) => p.bytes));
  const xs: [number, number] = [Math.min(...sizes), Math.max(Math.max(...sizes), Math.min(...sizes) * 2)];
  const h = 2 * PANEL_H + 30;
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${h}" viewBox="0 0 ${W} ${h}" font-family="sans-serif">`,
    `<rect width="${W}" height="${h}" fill="white"/>`,
    `<text x="${W / 2}" y="20" font-size="16" text-anchor="middle">${esc(title)}</text>`,
    panel(series, 20, "bus bandwidth", (p) => p.busbwGBps, "busbw (GB/s)", xs),
    panel(series, 20 + PANEL_H, "time", (p) => p.timeUs, "time (us)", xs),
    `</svg>`,
    "",
  ].join("\n");
}
