/* viewer-export/view/html/viewer_chart.js: one panel of the page (one snapshot):
 * its summary header, toolbar and the timeline chart: live bytes by
 * category stacked over time for the chosen device, allocated and reserved
 * lines, step and phase bands, the peak and OOMs marked; zoom, pan, hover,
 * click to select a time.  The views below the chart (live list, flame
 * graph, block map, top sites) are in viewer_details.js.
 *
 * Level of detail: the chart is drawn from DeviceSeries.columns(), one
 * column per CSS pixel holding the highest state reached in it, so the
 * peak never disappears when zoomed out and a click selects what the
 * pixel shows.
 */

const M = {l: 64, r: 12, t: 22, b: 24}; /* chart margins, CSS px */

function el(tag, cls, html) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (html !== undefined) e.innerHTML = html;
  return e;
}

class Panel {
  constructor(app, snap, index, wantOrdinal) {
    this.app = app; this.snap = snap; this.index = index;
    this.hidden = new Uint8Array(NCAT);
    const d = snap.d;
    // The device shown first: the one asked for, else the first with allocations.
    let di = wantOrdinal >= 0 ? snap.deviceIndexOf(wantOrdinal) : -1;
    if (di < 0) di = d.devices.findIndex(v => v.alloc_events + v.seeded > 0);
    this.di = di < 0 ? 0 : di;
    this.root = el('section', 'panel');
    this.root.dataset.panel = index;
    this.buildDom();
    this.resetZoom(false);
  }

  get dev() { return this.snap.d.devices[this.di]; }
  get series() { return this.snap.series_(this.di); }

  buildDom() {
    const d = this.snap.d, r = this.root;
    r.appendChild(el('h2', '', esc(d.label && d.label !== d.file ? d.label + ' (' + d.file + ')' : d.file) + (d.truncated_at ? ' <span class="warn">(truncated)</span>' : '')));
    this.summaryEl = el('dl', 'summary');
    r.appendChild(this.summaryEl);
    const tb = el('div', 'toolbar');
    if (d.devices.length > 1) {
      const lab = el('label', '', 'device ');
      this.devSel = el('select');
      d.devices.forEach((v, i) => {
        const o = el('option', '', esc(v.ordinal + ' (' + (v.name || v.vendor) + ')'));
        o.value = i;
        this.devSel.appendChild(o);
      });
      this.devSel.value = this.di;
      this.devSel.addEventListener('change', () => this.setDevice(+this.devSel.value));
      lab.appendChild(this.devSel);
      tb.appendChild(lab);
    }
    for (const [act, text, title] of [['in', '+', 'zoom in'], ['out', '\u2212', 'zoom out'],
      ['reset', 'whole run', 'reset zoom (0)']]) {
      const b = el('button', '', text);
      b.title = title;
      b.dataset.act = act;
      b.addEventListener('click', () => act === 'reset' ? this.resetZoom(true) : this.zoom(act === 'in' ? 0.5 : 2, 0.5));
      tb.appendChild(b);
    }
    // the event-index axis: one step per event, whatever the clock (not
    // in the ranks layout, whose lanes share one clock)
    if (!this.app.ranks) {
      const ix = el('label', '', '<input type="checkbox" data-testid="index-axis"> event index axis');
      ix.title = 'x: events one after another (as memory_viz draws), instead of time';
      this.indexBox = ix.firstChild;
      this.indexBox.checked = this.snap.indexAxis;
      this.indexBox.addEventListener('change', () => this.app.setIndexAxis(this.indexBox.checked));
      tb.appendChild(ix);
    }
    const fit = el('label', '', '<input type="checkbox"> fit memory axis to view');
    this.fitY = fit.firstChild;
    this.fitY.addEventListener('change', () => this.app.redrawAll());
    tb.appendChild(fit);
    const leg = el('div', 'legend');
    for (const c of CAT_ORDER) {
      const s = el('span', '', '<i class="chip" style="background:' + CAT_COLOR[c] + '"></i>' + esc(d.categories[c]));
      s.title = 'show or hide ' + d.categories[c];
      s.addEventListener('click', () => { this.hidden[c] ^= 1; s.classList.toggle('off'); this.draw(); });
      leg.appendChild(s);
    }
    leg.appendChild(el('span', '', '<i class="line-key" style="border-color:#222"></i>allocated'));
    leg.appendChild(el('span', '', '<i class="line-key" style="border-color:' +
      'var(--reserved);border-top-style:dashed"></i>reserved'));
    tb.appendChild(leg);
    r.appendChild(tb);

    const box = el('div', 'chart-box');
    this.canvas = el('canvas', 'chart');
    this.canvas.tabIndex = 0;
    this.canvas.setAttribute('data-testid', 'chart');
    this.canvas.setAttribute('aria-label', 'memory over time; click to inspect a time');
    this.tip = el('div', 'tip');
    box.appendChild(this.canvas);
    box.appendChild(this.tip);
    r.appendChild(box);
    this.selEl = el('div', 'selection');
    this.selEl.setAttribute('data-testid', 'selection');
    r.appendChild(this.selEl);
    buildDetailsDom(this);
    this.bindChart();
  }

  renderSummary() {
    const d = this.snap.d, h = d.header, v = this.dev, rows = [];
    const add = (k, val, id) => rows.push('<dt>' + k + '</dt><dd' + (id ? ' data-testid="' + id + '"' : '') +
      '>' + val + '</dd>');
    add('file', esc(d.path) + ' &middot; format ' + h.format_version + ', written by tidemark ' + esc(h.tool));
    add('process', 'pid ' + h.pid + ' on ' + esc(h.host || '?') +
      (h.rank >= 0 ? ', rank ' + h.rank + (h.world_size ? ' of ' + h.world_size : '') : ''));
    if (h.command) add('command', '<code>' + esc(h.command) + '</code>');
    add('started', fmtUtc(h.start_us) + (Number(h.dump_us) && Number(h.start_us)
      ? '; dumped ' + fmtOffset((Number(h.dump_us) - Number(h.start_us)) * 1000).slice(1) + ' later' : ''));
    if (h.memory_note) add('memory', '<span class="warn" data-testid="memory-note">' + esc(h.memory_note) + '</span>');
    add('recording', 'record=' + h.record + ' context=' + h.context + ' stacks=' + h.stacks +
      ' max_entries=' + h.max_entries + '; allocator ' + esc(h.alloc_mode || '?'));
    if (h.metadata) add('metadata', esc(h.metadata));
    add('devices', d.devices.map(x => esc(x.ordinal + ' ' + x.vendor + ' ' + x.name) +
      (x.capacity ? ' (' + fmtBytes(x.capacity) + ')' : '')).join('; ') || 'none');
    add('events', d.events + ' recorded, <span data-testid="dropped">' + d.dropped + '</span> dropped (ring of ' +
      h.max_entries + ')' + (d.dropped ? ' <span class="warn">&mdash; the oldest history is missing</span>' : ''));
    const name = 'device ' + v.ordinal + (v.name ? ' (' + esc(v.name) + ')' : '');
    if (d.events) {
      add('peak', '<span class="peak" data-testid="peak" data-bytes="' + v.peak + '">' + fmtExact(v.peak) +
        '</span>' + (v.capacity ? ', ' + fmtPct(v.peak, v.capacity) + ' of capacity' : '') + ' on ' + name);
      add('peak at', '<span data-testid="peak-when">' + esc(this.snap.describeSeq(v.peak_seq)) + '</span>');
      if (v.reserved_known)
        add('reserved', fmtBytes(v.reserved_at_peak) + ' at the peak; highest ' + fmtBytes(v.peak_reserved));
    } else if (v.stats) {
      add('peak', '<span class="peak" data-testid="peak" data-bytes="' + v.stats.allocated_bytes[1] + '">' +
        fmtExact(v.stats.allocated_bytes[1]) + '</span> (allocator stats; no history)');
    }
    if (!d.state_known && !d.events) add('live at end', 'unknown (no events and no final state in the file)');
    else add('live at end', fmtExact(Math.max(0, v.end_allocated)) + ' in ' + v.end_blocks + ' allocation' +
      (v.end_blocks === 1 ? '' : 's') + (v.end_from_state ? ', from the final allocator state' : ', replayed'));
    if (v.oom_events) add('OOMs', '<span class="warn">' + v.oom_events + ' out-of-memory event' +
      (v.oom_events === 1 ? '' : 's') + '</span>');
    const warn = [];
    if (d.truncated_at) warn.push('file truncated at byte ' + d.truncated_at + '; shown up to the cut');
    if (v.seeded) warn.push(v.seeded + ' allocation' + (v.seeded === 1 ? '' : 's') +
      ' older than the recorded history, counted from the start');
    if (v.anomalies) warn.push(v.anomalies + ' inconsistencies between events and final state');
    if (warn.length) add('note', '<span class="warn">' + warn.map(esc).join('<br>') + '</span>');
    this.summaryEl.innerHTML = rows.join('');
  }

  setDevice(di) {
    this.di = di;
    this.renderSummary();
    this.select(this.initialSeq());
    this.app.redrawAll();
  }

  initialSeq() { return this.snap.n ? this.dev.peak_seq : -1; }

  // ---- view range

  domain() { return [0, Math.max(this.snap.tEnd, 1)]; }
  /* How far zoom and pan may go: the run, or in the ranks layout the job. */
  bounds() { return this.app.ranks ? this.app.ranks.boundsFor(this) : this.domain(); }

  resetZoom(redraw) {
    const [a, b] = this.domain();
    const pad = (b - a) * 0.01;
    this.setRange(a - pad, b + pad, redraw);
  }

  /* A linked panel takes the other's range as it is (a shorter run then
   * leaves space on the right); otherwise the range stays on the run. */
  setRange(t0, t1, redraw = true, fromLink = false) {
    const [a, b] = this.bounds();
    /* ns: finer than any clock; on the index axis, a few events */
    let width = Math.max(t1 - t0, this.snap.indexAxis ? 4 : 50);
    if (!fromLink) {
      const lo = a - (b - a) * 0.05, hi = b + (b - a) * 0.05;
      width = Math.min(width, hi - lo);
      t0 = Math.min(Math.max(t0, lo), hi - width);
    }
    this.t0 = t0; this.t1 = t0 + width;
    if (redraw) this.draw();
    if (!fromLink && this.app.linkTime) this.app.linkRange(this);
  }

  zoom(factor, at) {
    const t = this.t0 + (this.t1 - this.t0) * at;
    this.setRange(t - (t - this.t0) * factor, t + (this.t1 - t) * factor);
  }

  plotW() { return Math.max(10, Math.floor(this.cssW - M.l - M.r)); }
  xOf(t) { return M.l + (t - this.t0) / (this.t1 - this.t0) * this.plotW(); }
  /* The middle of the column (CSS px, relative to the canvas) where position seq is drawn. */
  xOfSeq(seq) { return Math.floor(this.xOf(this.snap.timeOf(seq))) + 0.5; }

  yMax() {
    if (this.app.linkY && !this.fitY.checked) return this.app.sharedYMax();
    if (this.fitY.checked && this.cols) {
      let m = 0;
      for (let c = this.cols.first; c <= this.cols.last; c++)
        m = Math.max(m, this.cols.max[c], this.series.reservedKnown ? this.cols.rmax[c] : 0);
      return (m || 1) * 1.08;
    }
    return this.ownYMax();
  }

  ownYMax() {
    const v = this.dev, s = this.series;
    return Math.max(s.peak, v.reserved_known ? v.peak_reserved : 0, 1) * 1.08;
  }

  // ---- drawing

  draw() {
    const cv = this.canvas, dpr = window.devicePixelRatio || 1;
    const cssW = cv.clientWidth || 800, cssH = cv.clientHeight || 300;
    this.cssW = cssW; this.cssH = cssH;
    if (cv.width !== Math.round(cssW * dpr) || cv.height !== Math.round(cssH * dpr)) {
      cv.width = Math.round(cssW * dpr); cv.height = Math.round(cssH * dpr);
    }
    const W = this.plotW();
    this.cols = this.snap.n ? this.series.columns(this.t0, this.t1, W) : null;
    this.paint();
  }

  /* Repaints from the cached columns (hover and selection need no walk). */
  paint() {
    const cv = this.canvas, ctx = cv.getContext('2d'), dpr = cv.width / this.cssW;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.cssW, this.cssH);
    ctx.font = '11px system-ui, sans-serif';
    const W = this.plotW(), H = this.cssH - M.t - M.b, snap = this.snap;
    if (!snap.n) {
      if (this.cssH > 80) { this.canvas.style.height = '60px'; this.draw(); return; }
      ctx.fillStyle = '#5d6875';
      ctx.fillText(snap.d.state_known ? 'No events in this snapshot; the views below show its final allocator state.'
        : 'No events and no final allocator state in this file.', M.l, 30);
      return;
    }
    const cols = this.cols, ymax = this.yMax();
    const Y = v => M.t + H - v / ymax * H;
    this.drawBands(ctx, W, H);
    // y grid
    ctx.strokeStyle = '#e6e9ed'; ctx.fillStyle = '#5d6875'; ctx.lineWidth = 1;
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(ymax) / Math.log(1024))));
    const ystep = niceStep(ymax / unit / 5) * unit;
    for (let v = 0; v <= ymax; v += ystep) {
      const y = Math.round(Y(v)) + 0.5;
      ctx.beginPath(); ctx.moveTo(M.l, y); ctx.lineTo(M.l + W, y); ctx.stroke();
      ctx.fillText(fmtShort(v), M.l - 6, y);
    }
    // stacked categories
    const base = new Float64Array(W);
    for (const cat of CAT_ORDER) {
      if (this.hidden[cat]) continue;
      ctx.beginPath();
      let any = false;
      for (let c = cols.first; c <= cols.last; c++) {
        const v = cols.cats[c * NCAT + cat];
        if (v > 0) any = true;
        const y = Y(base[c] + v), x = M.l + c;
        if (c === cols.first) ctx.moveTo(x, y); else ctx.lineTo(x, y);
        ctx.lineTo(x + 1, y);
      }
      for (let c = cols.last; c >= cols.first; c--) {
        ctx.lineTo(M.l + c + 1, Y(base[c])); ctx.lineTo(M.l + c, Y(base[c]));
      }
      if (any) { ctx.fillStyle = CAT_COLOR[cat]; ctx.fill(); }
      for (let c = cols.first; c <= cols.last; c++) base[c] += cols.cats[c * NCAT + cat];
    }
    // allocated: the top of the stack, and the range inside busy pixels
    ctx.strokeStyle = 'rgba(30,30,30,0.35)';
    ctx.beginPath();
    for (let c = cols.first; c <= cols.last; c++)
      if (cols.n[c] > 1 && cols.min[c] < cols.max[c]) {
        ctx.moveTo(M.l + c + 0.5, Y(cols.min[c])); ctx.lineTo(M.l + c + 0.5, Y(cols.max[c]));
      }
    ctx.stroke();
    this.stepLine(ctx, cols, cols.max, Y, '#222', []);
    if (this.series.reservedKnown) this.stepLine(ctx, cols, cols.rmax, Y, '#34495e', [5, 3]);
    this.drawMarks(ctx, W, H);
    this.drawAxis(ctx, W, H);
    if (this.hoverX !== undefined) {
      ctx.strokeStyle = 'rgba(0,0,0,0.45)'; ctx.setLineDash([]);
      ctx.beginPath(); ctx.moveTo(this.hoverX + 0.5, M.t); ctx.lineTo(this.hoverX + 0.5, M.t + H); ctx.stroke();
    }
  }

  stepLine(ctx, cols, vals, Y, color, dash) {
    ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.setLineDash(dash);
    ctx.beginPath();
    for (let c = cols.first; c <= cols.last; c++) {
      const y = Y(vals[c]);
      if (c === cols.first) ctx.moveTo(M.l + c, y); else ctx.lineTo(M.l + c, y);
      ctx.lineTo(M.l + c + 1, y);
    }
    ctx.stroke();
    ctx.setLineDash([]); ctx.lineWidth = 1;
  }

  /* Steps as alternating shades, phases as a colored strip above the plot. */
  drawBands(ctx, W, H) {
    const s = this.snap, x0 = M.l, x1 = M.l + W;
    const clip = (a, b) => [Math.max(x0, a), Math.min(x1, b)];
    ctx.save();
    ctx.textBaseline = 'middle'; ctx.textAlign = 'left';
    const nst = s.stSeq.length;
    let lastPx = -1;
    for (let i = upperBound(s.stSeq, s.seqAtTime(this.t0)) - 1, k = 0; i < nst && k < 100000; i++, k++) {
      const a = i < 0 ? this.xOf(0) : this.xOf(s.timeOf(s.stSeq[i]));
      const b = i + 1 < nst ? this.xOf(s.timeOf(s.stSeq[i + 1])) : this.xOf(s.tEnd);
      if (a > x1) break;
      const [l, r] = clip(a, b);
      if (r <= l || Math.floor(l) === lastPx && r - l < 1) continue;
      lastPx = Math.floor(l);
      const step = i < 0 ? s.d.step0 : s.stVal[i];
      if (step % 2 === 1) { ctx.fillStyle = 'rgba(40,80,140,0.06)'; ctx.fillRect(l, M.t, r - l, H); }
      if (r - l > 46) { ctx.fillStyle = '#7a8591'; ctx.fillText('step ' + step, l + 3, M.t + 8); }
    }
    const nph = s.phSeq.length;
    lastPx = -1;
    for (let i = upperBound(s.phSeq, s.seqAtTime(this.t0)) - 1, k = 0; i < nph && k < 100000; i++, k++) {
      const a = i < 0 ? this.xOf(0) : this.xOf(s.timeOf(s.phSeq[i]));
      const b = i + 1 < nph ? this.xOf(s.timeOf(s.phSeq[i + 1])) : this.xOf(s.tEnd);
      if (a > x1) break;
      const [l, r] = clip(a, b);
      if (r <= l || Math.floor(l) === lastPx && r - l < 1) continue;
      lastPx = Math.floor(l);
      const name = s.phaseName(i < 0 ? s.d.phase0 : s.phVal[i]);
      if (!name) continue;
      ctx.fillStyle = phaseColor(name);
      ctx.fillRect(l, 3, Math.max(r - l, 1), 14);
      if (r - l > 24 && r - l > ctx.measureText(name).width + 6) { ctx.fillStyle = '#333'; ctx.fillText(name, l + 3, 10); }
    }
    ctx.restore();
  }

  drawMarks(ctx, W, H) {
    const s = this.snap, v = this.dev, x0 = M.l, x1 = M.l + W;
    ctx.save();
    ctx.font = 'bold 11px system-ui, sans-serif'; ctx.textBaseline = 'top'; ctx.textAlign = 'left';
    for (const o of s.d.oom) {
      if (o[1] !== this.di) continue;
      const x = Math.round(this.xOf(s.timeOf(o[0]))) + 0.5;
      if (x < x0 || x > x1) continue;
      ctx.strokeStyle = '#d00'; ctx.lineWidth = 2; ctx.setLineDash([]);
      ctx.beginPath(); ctx.moveTo(x, M.t); ctx.lineTo(x, M.t + H); ctx.stroke();
      ctx.fillStyle = '#d00';
      ctx.beginPath(); ctx.moveTo(x - 5, M.t + H); ctx.lineTo(x + 5, M.t + H); ctx.lineTo(x, M.t + H - 8); ctx.fill();
      ctx.fillText('OOM', x + 3, M.t + H - 22);
    }
    const px = Math.round(this.xOf(s.timeOf(v.peak_seq))) + 0.5;
    if (px >= x0 && px <= x1) {
      ctx.strokeStyle = '#c0392b'; ctx.lineWidth = 1; ctx.setLineDash([4, 3]);
      ctx.beginPath(); ctx.moveTo(px, M.t); ctx.lineTo(px, M.t + H); ctx.stroke();
      ctx.setLineDash([]);
      const label = 'peak ' + fmtBytes(v.peak);
      const w = ctx.measureText(label).width + 8;
      const lx = px + w + 4 > x1 ? px - w - 4 : px + 4;
      ctx.fillStyle = 'rgba(255,255,255,0.9)'; ctx.fillRect(lx, M.t + 14, w, 15);
      ctx.fillStyle = '#c0392b'; ctx.fillText(label, lx + 4, M.t + 16);
    }
    if (this.sel !== undefined) {
      const sx = Math.round(this.xOf(s.timeOf(this.sel))) + 0.5;
      if (sx >= x0 && sx <= x1) {
        ctx.strokeStyle = '#1565c0'; ctx.lineWidth = 2;
        ctx.beginPath(); ctx.moveTo(sx, M.t); ctx.lineTo(sx, M.t + H); ctx.stroke();
      }
    }
    ctx.restore();
  }

  drawAxis(ctx, W, H) {
    const span = this.t1 - this.t0, index = this.snap.indexAxis;
    const step = index ? Math.max(1, niceStep(span / Math.max(2, W / 110))) : niceStep(span / Math.max(2, W / 110));
    const origin = index ? 0 : this.snap.d.origin_ns;
    ctx.fillStyle = '#5d6875'; ctx.strokeStyle = '#98a2ad'; ctx.textAlign = 'center'; ctx.textBaseline = 'top';
    ctx.beginPath(); ctx.moveTo(M.l, M.t + H + 0.5); ctx.lineTo(M.l + W, M.t + H + 0.5); ctx.stroke();
    // ticks at round offsets from the recording start, as the summary counts time
    for (let t = Math.ceil((this.t0 + origin) / step) * step; t <= this.t1 + origin; t += step) {
      const x = Math.round(this.xOf(t - origin)) + 0.5;
      ctx.beginPath(); ctx.moveTo(x, M.t + H); ctx.lineTo(x, M.t + H + 4); ctx.stroke();
      const label = index ? 'event ' + Math.round(t - 1) : fmtTick(t, step, Math.abs(this.t1 + origin));
      if (x + ctx.measureText(label).width / 2 <= this.cssW) ctx.fillText(label, x, M.t + H + 6);
    }
  }

  // ---- interaction

  colAt(clientX) {
    const r = this.canvas.getBoundingClientRect();
    const c = Math.floor(clientX - r.left - M.l);
    return this.cols && c >= this.cols.first && c <= this.cols.last ? c : -1;
  }

  bindChart() {
    const cv = this.canvas;
    let drag = null;
    cv.addEventListener('pointerdown', e => {
      if (e.button !== 0) return;
      drag = {x: e.clientX, t0: this.t0, t1: this.t1, moved: false};
      cv.setPointerCapture(e.pointerId);
    });
    cv.addEventListener('pointermove', e => {
      if (drag) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        if (drag.moved) {
          cv.classList.add('dragging');
          const dt = dx / this.plotW() * (drag.t1 - drag.t0);
          this.setRange(drag.t0 - dt, drag.t1 - dt);
          this.hideTip();
          return;
        }
      }
      this.hover(e);
    });
    cv.addEventListener('pointerup', e => {
      cv.classList.remove('dragging');
      if (drag && !drag.moved) {
        const c = this.colAt(e.clientX);
        if (c >= 0 && this.cols.seq[c] >= -1) this.select(this.cols.seq[c]);
      }
      drag = null;
    });
    cv.addEventListener('pointerleave', () => { if (!drag) this.hideTip(); });
    cv.addEventListener('wheel', e => {
      e.preventDefault();
      const r = cv.getBoundingClientRect();
      const at = Math.min(1, Math.max(0, (e.clientX - r.left - M.l) / this.plotW()));
      this.zoom(Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.002))), at);
      this.hover(e);
    }, {passive: false});
    cv.addEventListener('keydown', e => {
      const s = this.series;
      let seq = null;
      if (e.key === 'ArrowLeft') seq = s.prevChange(this.sel);
      else if (e.key === 'ArrowRight') seq = s.nextChange(this.sel);
      else if (e.key === 'Home') seq = -1;
      else if (e.key === 'End') seq = this.snap.n - 1;
      else if (e.key === '+' || e.key === '=') this.zoom(0.5, 0.5);
      else if (e.key === '-') this.zoom(2, 0.5);
      else if (e.key === '0') this.resetZoom(true);
      else return;
      e.preventDefault();
      if (seq !== null) this.select(seq);
    });
  }

  hover(e) {
    const c = this.colAt(e.clientX);
    if (c < 0 || this.cols.seq[c] < -1) { this.hideTip(); return; }
    this.hoverX = M.l + c;
    this.paint();
    const s = this.snap, cols = this.cols, seq = cols.seq[c], tot = cols.max[c];
    const t = s.realTimeOf(seq) + s.d.origin_ns;
    let html = '<b>' + esc(s.describeSeq(seq)) + '</b><br>at ' + fmtOffset(t) + ' from the recording start';
    if (cols.n[c] > 1) html += '<br><i>' + cols.n[c] + ' changes in this pixel; its highest is shown</i>';
    html += '<table><tr><td>allocated</td><td class="n"><b>' + fmtBytes(tot) + '</b></td><td></td></tr>';
    if (this.series.reservedKnown)
      html += '<tr><td>reserved</td><td class="n">' + fmtBytes(this.series.reservedAt(seq)) + '</td><td></td></tr>';
    for (const cat of CAT_ORDER) {
      const v = cols.cats[c * NCAT + cat];
      if (!v) continue;
      html += '<tr><td><i class="chip" style="background:' + CAT_COLOR[cat] + '"></i>' + esc(s.d.categories[cat]) +
        '</td><td class="n">' + fmtBytes(v) + '</td><td class="n">' + fmtPct(v, tot) + '</td></tr>';
    }
    this.tip.innerHTML = html + '</table>';
    this.tip.style.display = 'block';
    const x = M.l + c, bw = this.tip.offsetWidth;
    this.tip.style.left = (x + 14 + bw > this.cssW ? x - bw - 14 : x + 14) + 'px';
    this.tip.style.top = (M.t + 6) + 'px';
  }

  hideTip() {
    this.tip.style.display = 'none';
    if (this.hoverX !== undefined) { this.hoverX = undefined; this.paint(); }
  }

  /* Selects position seq: the chart's marker and every view below follow. */
  select(seq) {
    this.sel = Math.max(-1, Math.min(seq, this.snap.n - 1));
    if (this.cols) this.paint();
    const s = this.snap, series = this.series, cats = new Float64Array(NCAT);
    const tot = s.n ? series.stateAt(this.sel, cats) : 0;
    this.live = s.liveAt(this.di, this.sel);
    let liveBytes = 0;
    for (const i of this.live) liveBytes += s.aSize[i];
    this.selEl.innerHTML = 'At <b>' + esc(s.describeSeq(this.sel)) + '</b>: <b data-testid="live-total" data-bytes="' +
      liveBytes + '" data-count="' + this.live.length + '">' + fmtExact(liveBytes) + '</b> allocated in ' +
      this.live.length + ' allocation' + (this.live.length === 1 ? '' : 's') +
      (series.reservedKnown ? '; reserved ' + fmtBytes(series.reservedAt(this.sel)) : '') +
      (s.n && tot !== liveBytes ? ' <span class="warn">(timeline says ' + fmtBytes(tot) + ')</span>' : '');
    renderDetails(this);
    if (this.app.panelSelected) this.app.panelSelected(this);
  }
}
