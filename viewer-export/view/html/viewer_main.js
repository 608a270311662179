/* viewer-export/view/html/viewer_main.js: starts the page: reads the embedded
 * data and lays it out as the tool asked (data.layout): "panels", one
 * panel per snapshot (two side by side to compare runs), their time axes
 * and memory scales linked when asked; or "ranks", the lanes of a
 * multi-rank job with one rank in detail (viewer_ranks.js).  Redraws on
 * resize, and publishes window.tidemarkView for tests and benchmarks:
 *   {ready, panels, app, ranks, timings: {decode_ms, first_draw_ms}}
 * (panels: the panels shown now; ranks: the RanksView or null) and the
 * performance mark "tdm-first-draw".
 */

class App {
  constructor(data) {
    this.data = data;
    const host = document.getElementById('panels');
    const t = performance.now();
    if (data.layout === 'ranks' || data.snapshots.length > 2) {
      /* Snapshots are decoded lane by lane as they are first drawn. */
      this.linkTime = true;
      this.linkY = false;
      this.panels = [];
      this.ranks = new RanksView(this, data);
      this.decodeMs = performance.now() - t;
      host.classList.add('ranks-layout');
      host.appendChild(this.ranks.root);
      const n = data.snapshots.length;
      document.getElementById('title').textContent = n + ' rank' + (n === 1 ? '' : 's') + ' on one time axis';
      document.title = 'tidemark view: ' + n + ' ranks';
      return;
    }
    this.ranks = null;
    this.linkTime = true;
    this.linkY = true;
    this.snaps = data.snapshots.map(d => new Snapshot(d));
    this.decodeMs = performance.now() - t;
    host.classList.toggle('two', this.snaps.length > 1);
    this.panels = this.snaps.map((s, i) => new Panel(this, s, i, data.device));
    this.panels.forEach(p => host.appendChild(p.root));
    document.getElementById('title').textContent = this.snaps.map(s => s.d.label || s.d.file).join('  vs  ');
    document.title = 'tidemark view: ' + this.snaps.map(s => s.d.label || s.d.file).join(' vs ');
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

  /* Allocated and reserved: two runs of one program under other
   * allocator settings (`tidemark replay --save`) allocate the same bytes
   * and differ only in what they reserve, so the reserved line is the
   * answer there, not a footnote. */
  renderCompare() {
    const [a, b] = this.panels.map(p => p.dev);
    const one = (what, x, y, id) => {
      const d = y - x, change = fmtChange(x, y);
      return what + ': ' + fmtBytes(x) + ' \u2192 ' + fmtBytes(y) + ' (<span data-testid="' + id + '" data-bytes="' + d + '">' +
        (d >= 0 ? '+' : '') + fmtBytes(d) + '</span>' + (change ? ', ' + change : '') + ')';
    };
    let text = one('peak allocated', a.peak, b.peak, 'peak-diff');
    if (a.reserved_known && b.reserved_known)
      text += ' \u00b7 ' + one('peak reserved', a.peak_reserved, b.peak_reserved, 'reserved-diff');
    document.getElementById('compare').innerHTML = text;
  }

  /* The event-index axis on or off, for every panel at once (linked
   * panels then line up event by event); each opens on its whole run. */
  setIndexAxis(on) {
    for (const p of this.panels) {
      p.snap.setIndexAxis(on);
      if (p.indexBox) p.indexBox.checked = on;
      p.cols = null;
    }
    if (this.linkTime && this.panels.length > 1) {
      const longest = this.panels.reduce((x, y) => (y.snap.tEnd > x.snap.tEnd ? y : x));
      longest.resetZoom(false);
      for (const p of this.panels) if (p !== longest) p.setRange(longest.t0, longest.t1, false, true);
    } else {
      for (const p of this.panels) p.resetZoom(false);
    }
    this.redrawAll();
  }

  sharedYMax() { return Math.max(...this.panels.map(p => p.ownYMax())); }

  /* Linked axes show the same offsets from each window's start; in the
   * ranks layout the lanes follow the detail panel on the job's axis. */
  linkRange(from) {
    if (this.ranks) { this.ranks.followPanel(from); return; }
    if (!this.panels) return; /* still making them */
    for (const p of this.panels) if (p !== from) p.setRange(from.t0, from.t1, true, true);
  }

  /* A panel selected a time (viewer_chart.js calls this). */
  panelSelected(p) { if (this.ranks) this.ranks.panelSelected(p); }

  redrawAll() {
    for (const p of this.panels) p.draw();
    if (this.ranks) this.ranks.invalidate();
    else if (this.panels.length > 1) this.renderCompare();
  }

  start() {
    if (this.ranks) {
      this.ranks.start();
    } else {
      for (const p of this.panels) p.renderSummary();
      if (this.linkTime) {
        // The longer run sets the common range so both fit.
        const longest = this.panels.reduce((x, y) => (y.snap.tEnd > x.snap.tEnd ? y : x));
        longest.resetZoom(false);
        for (const p of this.panels) if (p !== longest) p.setRange(longest.t0, longest.t1, false, true);
      }
      this.redrawAll();
    }
    performance.mark('tdm-first-draw');
    const firstDraw = performance.now();
    if (!this.ranks) for (const p of this.panels) p.select(p.initialSeq());
    let width = document.body.clientWidth;
    window.addEventListener('resize', () => {
      if (document.body.clientWidth === width) return;
      width = document.body.clientWidth;
      this.redrawAll();
      for (const p of this.panels) { drawFlame(p); renderMap(p); }
    });
    window.tidemarkView = {ready: true, panels: this.panels, app: this, ranks: this.ranks,
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
