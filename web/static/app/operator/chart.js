// The orders-per-second bar chart of a sale's card, drawn on a canvas.

// One bar a stats poll (a second): the chart shows the last minute.
export const CHART_POINTS = 60;

export function drawChart(canvas, rates) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(120, Math.round(canvas.clientWidth || 300));
  const h = Math.max(60, Math.round(canvas.clientHeight || 80));
  if (canvas.width !== w * dpr || canvas.height !== h * dpr) {
    canvas.width = w * dpr;
    canvas.height = h * dpr;
  }
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  const css = getComputedStyle(canvas);
  const fg = css.getPropertyValue("--chart-fg").trim() || "#e4572e";
  const grid = css.getPropertyValue("--chart-grid").trim() || "rgba(128,128,128,.3)";
  const text = css.getPropertyValue("--chart-text").trim() || "#888";
  const top = Math.max(1, ...rates);
  // A round ceiling: 1, 2, 5, 10, 20, 50…
  let ceil = 1;
  while (ceil < top) ceil = [2, 5, 10].map((m) => m * 10 ** Math.floor(Math.log10(ceil))).find((c) => c > ceil) || ceil * 10;
  const padL = 4, padB = 4, padT = 14;
  const plotH = h - padB - padT;
  ctx.strokeStyle = grid;
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(0, h - padB + 0.5);
  ctx.lineTo(w, h - padB + 0.5);
  ctx.moveTo(0, padT + 0.5);
  ctx.lineTo(w, padT + 0.5);
  ctx.stroke();
  ctx.fillStyle = text;
  ctx.font = "10px system-ui, sans-serif";
  ctx.textBaseline = "top";
  ctx.fillText(`${ceil}/s`, padL, 1);
  const slot = (w - padL) / CHART_POINTS;
  ctx.fillStyle = fg;
  rates.forEach((r, i) => {
    const x = padL + (CHART_POINTS - rates.length + i) * slot;
    const bh = Math.round((r / ceil) * plotH);
    if (bh > 0) ctx.fillRect(x + 0.5, h - padB - bh, Math.max(1, slot - 1), bh);
  });
}
