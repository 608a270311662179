/* viewer-export/view/html/viewer_ranks.js: the ranks layout of the page (a
 * multi-rank job: `tidemark view DIR`, more than two snapshots, or
 * --ranks): one lane per rank, in the order the tool sorted them (by
 * rank), all on one time axis, and the rank clicked shown in detail below
 * by an ordinary Panel (viewer_chart.js) whose time range follows the
 * lanes' and back.
 *
 * One time axis: each snapshot carries absolute CLOCK_REALTIME times
 * (t0_ns, its first event; header start_us, its recording start).  Zero is
 * the earliest recording start of all ranks; lane k's own times (ns from
 * its first event) sit at off[k] = t0_ns[k] - zero on that axis.  Every
 * time the page prints in this layout, the detail panel's included, counts
 * from that zero (Snapshot.d.origin_ns is set to off[k]).
 *
 * Staying fluid with many ranks: a lane is decoded (Snapshot) the first
 * time it is drawn or selected, and only lanes inside the scrolled list
 * are drawn (IntersectionObserver); redraws are coalesced into one
 * animation frame; the pointer's hover line repaints from cached columns
 * without walking the history again.
 */

const LANE_L = 64; /* as the chart's left margin, so times line up */

/* A lane's name: its rank (else its process), after its run folder's
 * name when the page holds several folders ("runA rank 0"); never the
 * file's name alone, which every run spells alike (tidemark-HOST-PID). */
function laneLabel(d) {
  const who = d.header.rank >= 0 ? 'rank ' + d.header.rank : d.header.pid > 0 ? 'pid ' + d.header.pid : d.file;
  return d.label && d.label !== d.file ? d.label + ' ' + who : who;
}

function bigOr0(s) { try { return BigInt(s || '0'); } catch (e) { return 0n; } }

class RanksView {
  constructor(app, data) {
    this.app = app;
    this.want = data.device;
    const n = data.snapshots.length;
    this.laneH = n <= 8 ? 56 : n <= 32 ? 40 : 28;
    // zero: the earliest recording start (or first event) of every rank
    const starts = data.snapshots.map(d => {
      const s = bigOr0(d.header.start_us) * 1000n;
      return s > 0n ? s : bigOr0(d.t0_ns);
    });
    const zero = starts.reduce((a, b) => (b > 0n && (a === 0n || b < a) ? b : a), 0n);
    this.zeroNs = zero;
    this.lanes = data.snapshots.map((d, k) => {
      const t0 = bigOr0(d.t0_ns);
      const off = d.events && t0 > 0n ? Number(t0 - zero) : Number(starts[k] - zero);
      const dump = bigOr0(d.header.dump_us) * 1000n;
      d.origin_ns = off; /* every printed time counts from the job's zero */
      let di = this.want >= 0 ? d.devices.findIndex(v => v.ordinal === this.want) : -1;
      if (di < 0) di = d.devices.findIndex(v => v.alloc_events + v.seeded > 0);
      if (di < 0) di = 0;
      const dev = d.devices[di];
      const peak = !dev ? 0 : d.events ? dev.peak : dev.stats ? dev.stats.allocated_bytes[1] : 0;
      return {k, d, off, di, dev, peak, snap: null, cols: null, key: '', visible: false,
        end: dump > 0n ? Number(dump - zero) : off, // refined once decoded
        last: off + (d.span_ns || 0), // its last event on the job's axis
        label: laneLabel(d)};
    });
    this.decoded = 0;
    this.sel = null;      /* {k, seq, T} */
    this.hoverT = null;
    this.ownY = false;
    this.panels = new Map(); /* rank index -> Panel, made on first selection */
    this.quiet = false;      /* making a panel: its range is not ours */
    this.buildDom();
  }

  snapOf(l) {
    if (!l.snap) {
      l.snap = new Snapshot(l.d);
      this.decoded++;
      l.end = Math.max(l.end, l.off + l.snap.tEnd);
    }
    return l.snap;
  }

  /* How far zoom and pan may go: from the job's zero (the earliest
   * recording start) to the last dump. */
  domain() { return [0, Math.max(1, ...this.lanes.map(l => l.end))]; }
  /* What the lanes open on ("whole job"): the span with events, from the
   * first rank's first event to the last one's last.  A job's start-up
   * (MPI_Init, `import torch`) records nothing and would otherwise leave
   * most of every lane empty and squeeze training into a spike. */
  span() {
    const busy = this.lanes.filter(l => l.d.events > 0);
    if (!busy.length) return this.domain();
    const a = Math.min(...busy.map(l => l.off)), b = Math.max(...busy.map(l => l.last));
    return b > a ? [a, b] : this.domain();
  }

  // ---- the page

  buildDom() {
    const r = this.root = el('section', 'ranks');
    r.setAttribute('data-testid', 'ranks');
    const L = this.lanes, peaks = L.map(l => l.peak);
    const hosts = [...new Set(L.map(l => l.d.header.host || '?'))];
    const hi = L.reduce((a, b) => (b.peak > a.peak ? b : a)), lo = L.reduce((a, b) => (b.peak < a.peak ? b : a));
    const mean = peaks.reduce((a, b) => a + b, 0) / L.length;
    const ords = new Set(L.map(l => l.dev ? l.dev.ordinal : -1));
    r.appendChild(el('h2', '', L.length + ' rank' + (L.length === 1 ? '' : 's') + ' on ' + hosts.length +
      ' host' + (hosts.length === 1 ? '' : 's') + ' <span class="muted">(' + esc(hosts.slice(0, 6).join(', ') +
      (hosts.length > 6 ? ', \u2026' : '')) + ')</span>'));
    const maxB = '<b data-testid="spread-max" data-bytes="' + hi.peak + '">' + fmtBytes(hi.peak) + '</b>';
    r.appendChild(el('div', 'spread', (L.length === 1 ? 'peak ' + maxB : 'peak: highest ' + maxB + ' (' +
      esc(hi.label) + '), lowest ' + fmtBytes(lo.peak) + ' (' + esc(lo.label) + '), mean ' + fmtBytes(mean)) + (ords.size > 1 ? '; each lane shows its rank\u2019s first device with allocations'
      : '; device ' + [...ords][0]) + '. Time counts from the first recording start, ' +
      fmtUtc(String(this.zeroNs / 1000n)) + ' (clocks of different hosts agree only as well as they are synchronized).'));
    const tb = el('div', 'toolbar');
    for (const [act, text, title] of [['in', '+', 'zoom in'], ['out', '\u2212', 'zoom out'],
      ['reset', 'whole job', 'every rank, first event to last (0)']]) {
      const b = el('button', '', text);
      b.title = title;
      b.dataset.act = act;
      b.addEventListener('click', () => act === 'reset' ? this.resetZoom() : this.zoom(act === 'in' ? 0.5 : 2, 0.5));
      tb.appendChild(b);
    }
    const own = el('label', '', '<input type="checkbox"> each rank its own memory scale');
    own.firstChild.addEventListener('change', e => { this.ownY = e.target.checked; this.invalidate(); });
    tb.appendChild(own);
    tb.appendChild(el('span', 'caption', 'click a lane: that rank then, in detail below \u00b7 wheel over the lanes: ' +
      'zoom (over the names: scroll) \u00b7 drag: pan \u00b7 \u2191/\u2193: next rank'));
    r.appendChild(tb);

    const box = this.box = el('div', 'lanes-box');
    const scroll = this.scroll = el('div', 'lanes-scroll');
    scroll.tabIndex = 0;
    scroll.setAttribute('aria-label', 'memory of every rank over time');
    this.axis = el('canvas', 'lanes-axis');
    scroll.appendChild(this.axis);
    for (const l of L) {
      const div = l.el = el('div', 'lane');
      div.dataset.lane = l.k;
      div.dataset.rank = l.d.header.rank;
      div.dataset.peak = l.peak;
      div.setAttribute('data-testid', 'lane');
      div.title = l.label + ' on ' + (l.d.header.host || '?') + ', ' + l.d.file + ': peak ' + fmtBytes(l.peak);
      div.style.height = this.laneH + 'px';
      l.canvas = el('canvas', 'lane-canvas');
      l.canvas.style.height = this.laneH + 'px';
      div.appendChild(l.canvas);
      scroll.appendChild(div);
    }
    box.appendChild(scroll);
    this.tip = el('div', 'tip');
    box.appendChild(this.tip);
    r.appendChild(box);
    this.detail = el('div', 'rank-detail');
    r.appendChild(this.detail);
    this.bind();
  }

  start() {
    const io = new IntersectionObserver(entries => {
      for (const e of entries) {
        const l = this.lanes[+e.target.dataset.lane];
        l.visible = e.isIntersecting;
      }
      this.schedule();
    }, {root: this.scroll, rootMargin: '200px 0px'});
    for (const l of this.lanes) io.observe(l.el);
    /* The list's scrollbar narrows the lanes: the detail panel gives up as
     * much on its right, so both plots end at the same x. */
    const gutter = this.scroll.offsetWidth - this.scroll.clientWidth;
    this.detail.style.paddingRight = Math.max(0, gutter - 12) + 'px';
    this.resetZoom(false);
    // The rank with the highest peak, at its peak: where one looks first.
    const hi = this.lanes.reduce((a, b) => (b.peak > a.peak ? b : a));
    this.select(hi.k, hi.d.events ? hi.dev.peak_seq : -1);
    // Lanes in view now, without waiting for the observer's first report.
    const top = this.scroll.getBoundingClientRect().top, bottom = top + this.scroll.clientHeight;
    for (const l of this.lanes) {
      const b = l.el.getBoundingClientRect();
      if (b.bottom >= top && b.top <= bottom + 200) l.visible = true;
    }
    this.drawNow();
  }

  // ---- range

  resetZoom(redraw = true) {
    const [a, b] = this.span(), pad = (b - a) * 0.01;
    this.setRange(a - pad, b + pad, false, redraw);
  }

  setRange(t0, t1, fromPanel = false, redraw = true) {
    const [a, b] = this.domain();
    let width = Math.max(t1 - t0, 50);
    if (!fromPanel) { /* the panel's range is the panel's business */
      const lo = a - (b - a) * 0.05, hi = b + (b - a) * 0.05;
      width = Math.min(width, hi - lo);
      t0 = Math.min(Math.max(t0, lo), hi - width);
    }
    this.t0 = t0; this.t1 = t0 + width;
    if (!fromPanel && this.sel) {
      const p = this.panels.get(this.sel.k);
      if (p) p.setRange(this.t0 - this.lanes[this.sel.k].off, this.t1 - this.lanes[this.sel.k].off, redraw, true);
    }
    if (redraw) this.schedule();
  }

  /* The job's extent in panel p's own times (ns from its first event). */
  boundsFor(p) {
    const [a, b] = this.domain(), off = this.lanes[p.index].off;
    return [a - off, b - off];
  }

  /* The detail panel zoomed or panned: the lanes follow. */
  followPanel(p) {
    if (this.quiet) return;
    const off = this.lanes[p.index].off;
    this.setRange(p.t0 + off, p.t1 + off, true);
  }

  zoom(factor, at) {
    const t = this.t0 + (this.t1 - this.t0) * at;
    this.setRange(t - (t - this.t0) * factor, t + (this.t1 - t) * factor);
  }

  /* The chart's right margin is 12 px; the list's scrollbar takes its share. */
  plotW() { return Math.max(10, Math.floor(this.cssW - LANE_L - this.rMargin)); }
  xOf(T) { return LANE_L + (T - this.t0) / (this.t1 - this.t0) * this.plotW(); }
  tOfX(x) { return this.t0 + (x - LANE_L) / this.plotW() * (this.t1 - this.t0); }

  // ---- drawing

  invalidate() { for (const l of this.lanes) l.key = ''; this.schedule(); }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => { this.pending = 0; this.drawNow(); });
  }

  yMax(l) {
    const top = x => Math.max(x.peak, x.dev && x.dev.reserved_known ? x.dev.peak_reserved : 0, 1) * 1.08;
    if (this.ownY) return top(l);
    if (this.sharedY === undefined) this.sharedY = Math.max(...this.lanes.map(top));
    return this.sharedY;
  }

  drawNow() {
    const w = this.lanes[0].canvas.clientWidth || this.scroll.clientWidth || 800;
    this.cssW = w;
    this.rMargin = Math.max(0, 12 - (this.scroll.offsetWidth - this.scroll.clientWidth));
    const t = performance.now();
    this.drawAxis();
    let drawn = 0;
    for (const l of this.lanes) if (l.visible) { this.drawLane(l); drawn++; }
    this.lastDraw = {lanes: drawn, ms: performance.now() - t};
  }

  drawAxis() {
    const cv = this.axis, h = 20, dpr = window.devicePixelRatio || 1, W = this.plotW();
    cv.style.height = h + 'px';
    cv.width = Math.round(this.cssW * dpr); cv.height = Math.round(h * dpr);
    const ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.cssW, h);
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#5d6875'; ctx.strokeStyle = '#98a2ad'; ctx.textBaseline = 'top';
    ctx.textAlign = 'left';
    ctx.fillText('job time', 4, 4);
    ctx.textAlign = 'center';
    const span = this.t1 - this.t0, step = niceStep(span / Math.max(2, W / 110));
    ctx.beginPath(); ctx.moveTo(LANE_L, h - 0.5); ctx.lineTo(LANE_L + W, h - 0.5); ctx.stroke();
    for (let T = Math.ceil(this.t0 / step) * step; T <= this.t1; T += step) {
      const x = Math.round(this.xOf(T)) + 0.5;
      if (x < LANE_L) continue;
      ctx.beginPath(); ctx.moveTo(x, h - 5); ctx.lineTo(x, h); ctx.stroke();
      const label = fmtTick(T, step, Math.abs(this.t1));
      if (x + ctx.measureText(label).width / 2 <= this.cssW) ctx.fillText(label, x, 3);
    }
  }

  /* Lane l's columns over the visible range (its own times), cached. */
  columnsOf(l) {
    const W = this.plotW(), key = this.t0 + ':' + this.t1 + ':' + W;
    if (l.key !== key) {
      const s = this.snapOf(l);
      l.cols = s.n ? s.series_(l.di).columns(this.t0 - l.off, this.t1 - l.off, W) : null;
      l.key = key;
    }
    return l.cols;
  }

  drawLane(l) {
    const cv = l.canvas, dpr = window.devicePixelRatio || 1, H = this.laneH, w = this.cssW;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(H * dpr)) {
      cv.width = Math.round(w * dpr); cv.height = Math.round(H * dpr);
    }
    const cols = this.columnsOf(l), s = l.snap;
    const ctx = cv.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const selected = this.sel && this.sel.k === l.k;
    ctx.fillStyle = selected ? '#eef4fb' : '#ffffff';
    ctx.fillRect(0, 0, w, H);
    ctx.font = 'bold 11px system-ui, sans-serif'; ctx.textBaseline = 'top'; ctx.textAlign = 'left';
    ctx.save(); ctx.beginPath(); ctx.rect(0, 0, LANE_L - 4, H); ctx.clip();
    ctx.fillStyle = selected ? '#1565c0' : '#1d232b';
    ctx.fillText(l.label, 4, 3);
    ctx.font = '10px system-ui, sans-serif'; ctx.fillStyle = '#5d6875';
    if (H >= 36) ctx.fillText(fmtShort(l.peak), 4, 17);
    if (H >= 50) ctx.fillText(l.d.header.host || '?', 4, 30);
    ctx.restore();
    const W = this.plotW(), top = 5, bot = H - 3, ph = bot - top;
    if (!s.n || !cols) {
      ctx.fillStyle = '#5d6875'; ctx.font = '11px system-ui, sans-serif';
      ctx.fillText('no events recorded', LANE_L + 4, top + 2);
      return this.drawMarks(ctx, l, top, bot);
    }
    const ymax = this.yMax(l), Y = v => bot - v / ymax * ph;
    this.drawBands(ctx, l, top, bot, W);
    const base = new Float64Array(W);
    for (const cat of CAT_ORDER) {
      ctx.beginPath();
      let any = false;
      for (let c = cols.first; c <= cols.last; c++) {
        const v = cols.cats[c * NCAT + cat];
        if (v > 0) any = true;
        const y = Y(base[c] + v), x = LANE_L + c;
        if (c === cols.first) ctx.moveTo(x, y); else ctx.lineTo(x, y);
        ctx.lineTo(x + 1, y);
      }
      for (let c = cols.last; c >= cols.first; c--) {
        ctx.lineTo(LANE_L + c + 1, Y(base[c])); ctx.lineTo(LANE_L + c, Y(base[c]));
      }
      if (any) { ctx.fillStyle = CAT_COLOR[cat]; ctx.fill(); }
      for (let c = cols.first; c <= cols.last; c++) base[c] += cols.cats[c * NCAT + cat];
    }
    const line = (vals, color, dash) => {
      ctx.strokeStyle = color; ctx.lineWidth = 1; ctx.setLineDash(dash);
      ctx.beginPath();
      for (let c = cols.first; c <= cols.last; c++) {
        const y = Math.max(top, Y(vals[c]));
        if (c === cols.first) ctx.moveTo(LANE_L + c, y); else ctx.lineTo(LANE_L + c, y);
        ctx.lineTo(LANE_L + c + 1, y);
      }
      ctx.stroke(); ctx.setLineDash([]);
    };
    line(cols.max, '#222', []);
    if (s.series_(l.di).reservedKnown) line(cols.rmax, '#34495e', [4, 3]);
    this.drawMarks(ctx, l, top, bot);
  }

  /* Phases as a strip along the top, odd steps shaded, as the chart does. */
  drawBands(ctx, l, top, bot, W) {
    const s = l.snap, x0 = LANE_L, x1 = LANE_L + W;
    const X = t => this.xOf(t + l.off);
    const t0 = this.t0 - l.off;
    const each = (seqs, fn) => {
      let lastPx = -1;
      for (let i = upperBound(seqs, s.seqAtTime(t0)) - 1, k = 0; i < seqs.length && k < 100000; i++, k++) {
        const a = i < 0 ? X(0) : X(s.timeOf(seqs[i]));
        const b = i + 1 < seqs.length ? X(s.timeOf(seqs[i + 1])) : X(s.tEnd);
        if (a > x1) break;
        const lft = Math.max(x0, a), rgt = Math.min(x1, b);
        if (rgt <= lft || Math.floor(lft) === lastPx && rgt - lft < 1) continue;
        lastPx = Math.floor(lft);
        fn(i, lft, rgt);
      }
    };
    each(s.stSeq, (i, a, b) => {
      const step = i < 0 ? s.d.step0 : s.stVal[i];
      if (step % 2 === 1) { ctx.fillStyle = 'rgba(40,80,140,0.07)'; ctx.fillRect(a, top, b - a, bot - top); }
    });
    each(s.phSeq, (i, a, b) => {
      const name = s.phaseName(i < 0 ? s.d.phase0 : s.phVal[i]);
      if (name) { ctx.fillStyle = phaseColor(name); ctx.fillRect(a, 0, Math.max(b - a, 1), 4); }
    });
  }

  /* The peak (a red tick), OOMs, the selected time and the pointer's. */
  drawMarks(ctx, l, top, bot) {
    const W = this.plotW(), x0 = LANE_L, x1 = LANE_L + W, s = l.snap;
    const vline = (T, color, width, dash) => {
      const x = Math.round(this.xOf(T)) + 0.5;
      if (x < x0 || x > x1) return;
      ctx.strokeStyle = color; ctx.lineWidth = width; ctx.setLineDash(dash);
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, bot); ctx.stroke(); ctx.setLineDash([]);
    };
    if (s && s.n) {
      for (const o of s.d.oom) if (o[1] === l.di) vline(l.off + s.timeOf(o[0]), '#d00', 2, []);
      const px = Math.round(this.xOf(l.off + s.timeOf(l.dev.peak_seq))) + 0.5;
      if (px >= x0 && px <= x1) {
        ctx.fillStyle = '#c0392b';
        ctx.beginPath(); ctx.moveTo(px - 4, top - 1); ctx.lineTo(px + 4, top - 1); ctx.lineTo(px, top + 5); ctx.fill();
      }
    }
    if (this.sel) vline(this.sel.T, '#1565c0', this.sel.k === l.k ? 2 : 1, this.sel.k === l.k ? [] : [3, 2]);
    if (this.hoverT !== null) vline(this.hoverT, 'rgba(0,0,0,0.45)', 1, []);
    ctx.lineWidth = 1;
    ctx.strokeStyle = '#e6e9ed';
    ctx.beginPath(); ctx.moveTo(0, this.laneH - 0.5); ctx.lineTo(this.cssW, this.laneH - 0.5); ctx.stroke();
  }

  // ---- selection

  /* Shows lane k at position seq in the detail panel below. */
  select(k, seq) {
    const l = this.lanes[k], s = this.snapOf(l);
    seq = Math.max(-1, Math.min(seq, s.n - 1));
    let p = this.panels.get(k);
    const fresh = !p;
    if (fresh) {
      this.quiet = true;
      p = new Panel(this.app, s, k, l.dev ? l.dev.ordinal : this.want);
      this.quiet = false;
      this.panels.set(k, p);
    }
    this.sel = {k, seq, T: l.off + s.timeOf(seq)};
    this.reveal(l);
    const head = el('h3', 'detail-head', esc(l.label) + ' in detail' + (l.d.header.host ? ' <span class="muted">on ' +
      esc(l.d.header.host) + '</span>' : ''));
    head.setAttribute('data-testid', 'detail-head');
    this.detail.replaceChildren(head, p.root);
    const panels = this.app.panels;
    panels.length = 0;
    panels.push(p);
    if (fresh) p.renderSummary();
    p.setRange(this.t0 - l.off, this.t1 - l.off, false, true);
    p.draw();
    this.selecting = true;
    p.select(seq);
    this.selecting = false;
    this.schedule();
  }

  /* Scrolls the list (not the page) so that lane l shows below the axis. */
  reveal(l) {
    const box = this.scroll.getBoundingClientRect(), r = l.el.getBoundingClientRect();
    const above = r.top - (box.top + this.axis.offsetHeight), below = r.bottom - (box.top + this.scroll.clientHeight);
    if (above < 0) this.scroll.scrollTop += above;
    else if (below > 0) this.scroll.scrollTop += below;
  }

  /* The detail panel selected a position (a click on its chart, a key). */
  panelSelected(p) {
    if (this.selecting || !this.sel || p.index !== this.sel.k) return;
    const l = this.lanes[p.index];
    this.sel = {k: p.index, seq: p.sel, T: l.off + p.snap.timeOf(p.sel)};
    this.schedule();
  }

  /* The position of lane l under time T: the column's own state when
   * drawn (the highest of the pixel), else the last event at or before T. */
  seqAt(l, x, T) {
    const c = Math.floor(x - LANE_L);
    if (l.cols && c >= l.cols.first && c <= l.cols.last && l.cols.seq[c] >= -1) return l.cols.seq[c];
    const s = this.snapOf(l);
    return s.seqAtTime(T - l.off);
  }

  // ---- interaction

  laneAt(e) {
    const t = e.target.closest && e.target.closest('.lane');
    return t ? this.lanes[+t.dataset.lane] : null;
  }

  bind() {
    const sc = this.scroll;
    let drag = null;
    const xIn = e => e.clientX - sc.getBoundingClientRect().left;
    sc.addEventListener('pointerdown', e => {
      if (e.button !== 0 || !this.laneAt(e)) return;
      drag = {x: e.clientX, t0: this.t0, t1: this.t1, moved: false, lane: this.laneAt(e)};
      sc.setPointerCapture(e.pointerId);
    });
    sc.addEventListener('pointermove', e => {
      if (drag) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved) {
          sc.classList.add('dragging');
          const dt = dx / this.plotW() * (drag.t1 - drag.t0);
          this.setRange(drag.t0 - dt, drag.t1 - dt);
          this.hideTip();
          return;
        }
      }
      this.hover(e);
    });
    sc.addEventListener('pointerup', e => {
      sc.classList.remove('dragging');
      if (drag && !drag.moved) {
        const x = xIn(e), l = drag.lane;
        if (x >= LANE_L && x <= LANE_L + this.plotW()) this.select(l.k, this.seqAt(l, x, this.tOfX(x)));
        else this.select(l.k, this.sel ? this.snapOf(l).seqAtTime(this.sel.T - l.off) : -1);
      }
      drag = null;
    });
    sc.addEventListener('pointerleave', () => { if (!drag) this.hideTip(); });
    /* The wheel zooms over the plots and scrolls the list over the labels. */
    sc.addEventListener('wheel', e => {
      const x = xIn(e);
      if (!this.laneAt(e) || x < LANE_L) return;
      e.preventDefault();
      const at = Math.min(1, Math.max(0, (x - LANE_L) / this.plotW()));
      this.zoom(Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.002))), at);
      this.hover(e);
    }, {passive: false});
    sc.addEventListener('keydown', e => {
      if (e.key === 'ArrowUp' || e.key === 'ArrowDown') {
        if (!this.sel) return;
        const k = this.sel.k + (e.key === 'ArrowUp' ? -1 : 1);
        if (k < 0 || k >= this.lanes.length) return;
        const l = this.lanes[k];
        this.select(k, this.snapOf(l).seqAtTime(this.sel.T - l.off));
      } else if (e.key === '+' || e.key === '=') this.zoom(0.5, 0.5);
      else if (e.key === '-') this.zoom(2, 0.5);
      else if (e.key === '0') this.resetZoom();
      else return;
      e.preventDefault();
    });
  }

  hover(e) {
    const l = this.laneAt(e), x = e.clientX - this.scroll.getBoundingClientRect().left;
    if (!l || x < LANE_L || x > LANE_L + this.plotW()) { this.hideTip(); return; }
    const T = this.tOfX(x), s = this.snapOf(l);
    this.hoverT = T;
    this.schedule();
    if (!s.n || T < l.off || T > l.off + s.tEnd) {
      this.tip.innerHTML = '<b>' + esc(l.label) + '</b>: outside its recorded window';
    } else {
      const seq = this.seqAt(l, x, T), cats = new Float64Array(NCAT);
      const series = s.series_(l.di), tot = series.stateAt(seq, cats);
      this.tip.innerHTML = '<b>' + esc(l.label) + '</b> on ' + esc(l.d.header.host || '?') + '<br>' +
        esc(s.describeSeq(seq)) + '<br>allocated <b>' + fmtBytes(tot) + '</b>' +
        (series.reservedKnown ? ', reserved ' + fmtBytes(series.reservedAt(seq)) : '') +
        '<br>peak ' + fmtBytes(l.peak);
    }
    const box = this.box.getBoundingClientRect(), y = e.clientY - box.top;
    this.tip.style.display = 'block';
    const w = this.tip.offsetWidth;
    this.tip.style.left = (x + 14 + w > this.cssW ? x - w - 14 : x + 14) + 'px';
    this.tip.style.top = (y + 12) + 'px';
  }

  hideTip() {
    this.tip.style.display = 'none';
    if (this.hoverT !== null) { this.hoverT = null; this.schedule(); }
  }
}
