/* viewer-export/html/viewer_main.js: starts the page: reads the embedded
 * data, makes one panel per snapshot (two side by side to compare runs),
 * links their time axes and memory scales when asked, redraws on resize,
 * and publishes window.tidemarkView for tests and benchmarks:
 *   {ready, panels, timings: {decode_ms, first_draw_ms}}
 * and the performance mark "tdm-first-draw".
 */

class App {
  constructor(data) {
    this.data = data;
    this.linkTime = true;
    this.linkY = true;
    const t = performance.now();
    this.snaps = data.snapshots.map(d => new Snapshot(d));
    this.decodeMs = performance.now() - t;
    const host = document.getElementById('panels');
    host.classList.toggle('two', this.snaps.length > 1);
    this.panels = this.snaps.map((s, i) => new Panel(this, s, i, data.device));
    this.panels.forEach(p => host.appendChild(p.root));
    document.getElementById('title').textContent = this.snaps.map(s => s.d.file).join('  vs  ');
    document.title = 'tidemark view: ' + this.snaps.map(s => s.d.file).join(' vs ');
    if (this.panels.length > 1) this.bindCompare();
    else { this.linkTime = false; this.linkY = false; }
  }

  bindCompare() {
    const box = document.getElementById('compare-controls');
    box.hidden = false;
    const lt = document.getElementById('link-time'), ly = document.getElementById('link-y');
    lt.addEventListener('change', () => { this.linkTime = lt.checked; if (this.linkTime) this.linkRange(this.panels[0]); });
    ly.addEventListener('change', () => { this.linkY = ly.checked; this.redrawAll(); });
    this.renderCompare();
  }

  renderCompare() {
    const [a, b] = this.panels.map(p => p.dev);
    const d = b.peak - a.peak;
    document.getElementById('compare').innerHTML = 'peak: ' + fmtBytes(a.peak) + ' \u2192 ' + fmtBytes(b.peak) +
      ' (<span data-testid="peak-diff">' + (d >= 0 ? '+' : '') + fmtBytes(d) + '</span>, ' +
      (a.peak ? (d >= 0 ? '+' : '') + (100 * d / a.peak).toFixed(1) + '%' : 'n/a') + ')';
  }

  sharedYMax() { return Math.max(...this.panels.map(p => p.ownYMax())); }

  /* Linked axes show the same offsets from each window's start. */
  linkRange(from) {
    if (!this.panels) return; /* still making them */
    for (const p of this.panels) if (p !== from) p.setRange(from.t0, from.t1, true, true);
  }

  redrawAll() {
    for (const p of this.panels) p.draw();
    if (this.panels.length > 1) this.renderCompare();
  }

  start() {
    for (const p of this.panels) p.renderSummary();
    if (this.linkTime) {
      // The longer run sets the common range so both fit.
      const longest = this.panels.reduce((x, y) => (y.snap.tEnd > x.snap.tEnd ? y : x));
      longest.resetZoom(false);
      for (const p of this.panels) if (p !== longest) p.setRange(longest.t0, longest.t1, false, true);
    }
    this.redrawAll();
    performance.mark('tdm-first-draw');
    const firstDraw = performance.now();
    for (const p of this.panels) p.select(p.initialSeq());
    let width = document.body.clientWidth;
    window.addEventListener('resize', () => {
      if (document.body.clientWidth === width) return;
      width = document.body.clientWidth;
      this.redrawAll();
      for (const p of this.panels) { drawFlame(p); renderMap(p); }
    });
    window.tidemarkView = {ready: true, panels: this.panels, app: this,
      timings: {decode_ms: this.decodeMs, first_draw_ms: firstDraw, details_ms: performance.now() - firstDraw}};
    document.body.dataset.ready = '1';
  }
}

function tdmMain() {
  let data;
  try {
    data = JSON.parse(document.getElementById('tdm-data').textContent);
  } catch (err) {
    document.getElementById('panels').textContent = 'tidemark view: the embedded data cannot be read: ' + err;
    throw err;
  }
  new App(data).start();
}
