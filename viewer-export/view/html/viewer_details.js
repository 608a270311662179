/* viewer-export/view/html/viewer_details.js: the views of one panel that follow
 * the selected time: the allocations live then (largest first, with their
 * stacks), a flame graph of their bytes by stack, the segment and block
 * map (what memory_viz calls allocator state), and the top allocation
 * sites.  A stack with Python frames shows them first and folds its native
 * frames into groups that open on a click (Snapshot.stackParts).  Each is rebuilt from Snapshot queries when the selection or the
 * device changes; none keeps state beyond the panel's.
 */

const FLAG_SEEDED = 1 | 2;
const LIVE_PAGE = 200;

function buildDetailsDom(p) {
  const r = p.root, cols = el('div', 'cols');
  const left = el('div'), right = el('div');
  left.appendChild(el('h3', '', 'Allocations live then, largest first'));
  left.appendChild(el('div', 'caption', 'Click a row for its stack.'));
  const sc = el('div', 'scroll');
  p.liveTable = el('table', 'list live');
  p.liveTable.setAttribute('data-testid', 'live-list');
  sc.appendChild(p.liveTable);
  left.appendChild(sc);
  p.liveMore = el('div', 'more');
  left.appendChild(p.liveMore);
  right.appendChild(el('h3', '', 'Live bytes by stack (flame graph)'));
  p.flameCap = el('div', 'caption');
  right.appendChild(p.flameCap);
  const fb = el('div', 'flame-box');
  p.flameCanvas = el('canvas', 'flame');
  p.flameCanvas.setAttribute('data-testid', 'flame');
  p.flameTip = el('div', 'tip');
  fb.appendChild(p.flameCanvas); fb.appendChild(p.flameTip);
  right.appendChild(fb);
  cols.appendChild(left); cols.appendChild(right);
  r.appendChild(cols);

  r.appendChild(el('h3', '', 'Segments and blocks then'));
  p.mapCap = el('div', 'caption');
  p.mapCap.setAttribute('data-testid', 'map-caption');
  r.appendChild(p.mapCap);
  const mb = el('div', 'map-box');
  p.mapCanvas = el('canvas', 'map');
  p.mapCanvas.setAttribute('data-testid', 'blockmap');
  p.mapTip = el('div', 'tip');
  mb.appendChild(p.mapCanvas); mb.appendChild(p.mapTip);
  r.appendChild(mb);

  p.sitesTitle = el('h3', '', 'Top allocation sites');
  r.appendChild(p.sitesTitle);
  p.sitesTable = el('table', 'list sites');
  p.sitesTable.setAttribute('data-testid', 'sites');
  r.appendChild(p.sitesTable);
  bindFlame(p);
  bindMap(p);
}

function renderDetails(p) {
  p.liveShown = LIVE_PAGE;
  renderLive(p);
  p.flameRoot = buildFlame(p);
  p.flameZoom = p.flameRoot;
  drawFlame(p);
  renderMap(p);
  renderSites(p);
}

function sizeCanvas(cv, cssH) {
  const dpr = window.devicePixelRatio || 1, w = cv.clientWidth || 600;
  cv.style.height = cssH + 'px';
  cv.width = Math.round(w * dpr); cv.height = Math.round(cssH * dpr);
  const ctx = cv.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, cssH);
  ctx.font = '11px system-ui, sans-serif';
  return [ctx, w];
}

function placeTip(tip, box, x, y, html) {
  tip.innerHTML = html;
  tip.style.display = 'block';
  const w = tip.offsetWidth;
  tip.style.left = (x + 14 + w > box ? Math.max(0, x - w - 14) : x + 14) + 'px';
  tip.style.top = (y + 12) + 'px';
}

// ---- stacks --------------------------------------------------------------------

/* One frame: its label, and a tag when the compiler inlined it into the
 * frame after it (same pc). */
function frameHtml(s, f) {
  return esc(s.frameLabel(f)) +
    (s.frameKind(f) === FRAME_INLINED ? ' <span class="tag" data-testid="inlined">inlined</span>' : '');
}

function plural(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }

/* A run of native frames folded under "N native frames" (<details>, so a
 * click opens it without script). */
function foldedHtml(s, frames, label, inner) {
  return '<details class="native" data-testid="native-group" data-count="' + frames.length + '"><summary>' +
    esc(label) + '</summary>' + (inner !== undefined ? inner :
      frames.map(f => '<div class="frame">' + frameHtml(s, f) + '</div>').join('')) + '</details>';
}

function partsHtml(s, parts, maxPy, innermost) {
  const out = [];
  let shown = 0, k = 0;
  for (; k < parts.length; k++) {
    const q = parts[k];
    if (shown === maxPy) break;
    if (q.py !== undefined) {
      shown++;
      out.push('<div class="frame py" data-testid="py-frame" title="' + esc(s.frameFile(q.py)) + '">' +
        frameHtml(s, q.py) + '</div>');
    } else {
      out.push(foldedHtml(s, q.native, plural(q.native.length, 'native frame') +
        (q.where === 'inner' ? ' called from ' + s.frameFn(innermost) : '')));
    }
  }
  if (k < parts.length) {
    const rest = parts.slice(k);
    const n = rest.reduce((a, q) => a + (q.py !== undefined ? 1 : q.native.length), 0);
    out.push(foldedHtml(s, [], plural(n, 'more frame'), partsHtml(s, rest, Infinity, innermost)));
  }
  return out.join('');
}

/* A stack as HTML for a cell that keeps line breaks (white-space: pre).
 * Without Python frames: one frame a line, innermost first, as `tidemark
 * summary` lists them (at most maxPy).  With Python frames: the Python
 * frames first (at most maxPy, the rest folded), each native run folded
 * where it is (Snapshot.stackParts). */
function stackHtml(s, stack, maxPy = Infinity) {
  const parts = s.stackParts(stack);
  if (!parts) {
    const fr = s.stackFrames(stack).slice(0, maxPy);
    return fr.length ? fr.map(f => frameHtml(s, f)).join('\n') : '(no stack recorded)';
  }
  return partsHtml(s, parts, maxPy, parts[0].py);
}

// ---- the live list ---------------------------------------------------------

/* "device_alloc ← forward_layer ← forward": the innermost frames' names. */
function siteChain(s, fr) {
  return fr.length ? fr.slice(0, 3).map(f => s.frameLabel(f, false)).join(' \u2190 ') : '(no stack)';
}

function renderLive(p) {
  const s = p.snap, live = p.live, n = Math.min(live.length, p.liveShown);
  const rows = ['<thead><tr><th class="n">#</th><th class="n">size</th><th>category</th>' +
    '<th>allocated</th><th>site</th></tr></thead><tbody>'];
  for (let k = 0; k < n; k++) {
    const i = live[k], fr = s.siteFrames(s.aStack[i]), flags = s.aFlags[i];
    const when = s.aSeq[i] >= 0 ? fmtOffset(s.realTimeOf(s.aSeq[i]) + s.d.origin_ns)
      : (flags & FLAG_SEEDED ? 'before the window' : 'start');
    rows.push('<tr class="row" data-testid="live-row" data-alloc="' + i + '" data-bytes="' + s.aSize[i] +
      '"><td class="n">' + (k + 1) + '</td><td class="n">' + fmtBytes(s.aSize[i]) + '</td><td><i class="chip" style="background:' +
      CAT_COLOR[s.aCat[i]] + '"></i>' + esc(s.d.categories[s.aCat[i]]) + '</td><td>' + when + (p.sel >= s.aReq[i] ? ' <i>(free pending)</i>' : '') + '</td><td title="' +
      esc(fr.length ? s.frameLabel(fr[0]) : '') + '">' + esc(siteChain(s, fr)) + '</td></tr>');
  }
  if (!live.length) rows.push('<tr><td colspan="5" class="empty">nothing live on this device then</td></tr>');
  p.liveTable.innerHTML = rows.join('') + '</tbody>';
  p.liveTable.querySelectorAll('tr.row').forEach(tr => tr.addEventListener('click', () => {
    const next = tr.nextElementSibling;
    if (next && next.classList.contains('stack')) { next.remove(); return; }
    const i = +tr.dataset.alloc;
    const st = el('tr', 'stack', '<td></td><td colspan="4"><div>' + esc('address ' + hex(s.aAddr[i]) + ', ' + s.aSize[i] +
      ' bytes requested') + '</div>' + stackHtml(s, s.aStack[i]) + '</td>');
    st.setAttribute('data-testid', 'live-stack');
    tr.after(st);
  }));
  p.liveMore.innerHTML = '';
  if (live.length > n) {
    const b = el('button', '', 'show ' + Math.min(LIVE_PAGE, live.length - n) + ' more of ' + live.length);
    b.addEventListener('click', () => { p.liveShown += LIVE_PAGE; renderLive(p); });
    p.liveMore.appendChild(b);
  }
}

// ---- flame graph of live bytes by stack ---------------------------------------

function buildFlame(p) {
  const s = p.snap;
  const root = {name: 'all live memory', bytes: 0, count: 0, kids: new Map(), parent: null};
  const byStack = new Map();
  for (const i of p.live) {
    const e = byStack.get(s.aStack[i]) || {bytes: 0, count: 0};
    e.bytes += s.aSize[i]; e.count++;
    byStack.set(s.aStack[i], e);
  }
  let depth = 0;
  for (const [stack, e] of byStack) {
    const path = flamePath(s, stack);
    let node = root;
    root.bytes += e.bytes; root.count += e.count;
    for (const q of path) {
      let kid = node.kids.get(q.name);
      if (!kid) { kid = {name: q.name, bytes: 0, count: 0, kids: new Map(), parent: node, frame: q.frame, tip: q.tip}; node.kids.set(q.name, kid); }
      kid.bytes += e.bytes; kid.count += e.count;
      node = kid;
    }
    depth = Math.max(depth, path.length);
  }
  root.depth = depth;
  return root;
}

/* A stack's bars, outermost first.  With Python frames: the Python frames
 * ("train.py:19 Model.forward"), then one bar for the native code they
 * called; the interpreter's frames are left out, as in the stack lists
 * where they start folded. */
function flamePath(s, stack) {
  const parts = s.stackParts(stack);
  if (!parts) {
    const fr = s.stackFrames(stack).reverse();
    return fr.length ? fr.map(f => ({name: s.frameLabel(f, false), frame: f})) : [{name: '(no stack recorded)'}];
  }
  const py = parts.filter(q => q.py !== undefined).map(q => q.py);
  const path = py.slice().reverse().map(f => ({name: s.frameLabel(f), frame: f}));
  const inner = parts.find(q => q.where === 'inner');
  if (inner)
    path.push({name: 'native frames', frame: inner.native[0], tip: 'native frames called from ' + s.frameLabel(py[0]) +
      ', innermost ' + s.frameLabel(inner.native[0])});
  return path;
}

function flameColor(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 33 + name.charCodeAt(i)) >>> 0;
  return 'hsl(' + (15 + h % 40) + ',' + (70 + h % 20) + '%,' + (62 + (h >> 8) % 14) + '%)';
}

const FLAME_ROW = 17;

function drawFlame(p) {
  const root = p.flameRoot, zoom = p.flameZoom;
  let zd = 0;
  for (let n = zoom; n.parent; n = n.parent) zd++;
  const rows = Math.min(root.depth - zd + 1, 40);
  const [ctx, W] = sizeCanvas(p.flameCanvas, Math.max(rows, 1) * FLAME_ROW + 2);
  p.flameRects = [];
  p.flameCap.textContent = root.bytes ? fmtBytes(root.bytes) + ' in ' + root.count + ' allocations' +
    (zoom !== root ? '; zoomed into ' + zoom.name + ' (click the top bar to go back up)' : '; click a frame to zoom') : '';
  if (!root.bytes) {
    ctx.fillStyle = '#5d6875'; ctx.fillText('nothing live then', 8, 12);
    return;
  }
  ctx.textBaseline = 'middle';
  const lay = (node, x, w, row) => {
    if (w < 0.3 || row >= rows) return;
    const y = row * FLAME_ROW;
    ctx.fillStyle = row === 0 ? '#cfd8e3' : flameColor(node.name);
    ctx.fillRect(x, y, Math.max(w - 0.5, 0.5), FLAME_ROW - 1);
    p.flameRects.push({x, y, w, node});
    if (w > 30) {
      ctx.save(); ctx.beginPath(); ctx.rect(x, y, w - 2, FLAME_ROW); ctx.clip();
      ctx.fillStyle = '#222'; ctx.fillText(node.name + ' ' + fmtBytes(node.bytes), x + 3, y + FLAME_ROW / 2);
      ctx.restore();
    }
    const kids = [...node.kids.values()].sort((a, b) => b.bytes - a.bytes);
    let cx = x;
    for (const k of kids) { const kw = w * k.bytes / node.bytes; lay(k, cx, kw, row + 1); cx += kw; }
  };
  lay(zoom, 0, W, 0);
}

function flameHit(p, e) {
  const r = p.flameCanvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
  for (const q of p.flameRects || [])
    if (x >= q.x && x < q.x + q.w && y >= q.y && y < q.y + FLAME_ROW) return [q, x, y];
  return [null, x, y];
}

function bindFlame(p) {
  const cv = p.flameCanvas;
  cv.addEventListener('pointermove', e => {
    const [q, x, y] = flameHit(p, e);
    if (!q) { p.flameTip.style.display = 'none'; return; }
    const n = q.node, s = p.snap;
    const label = n.tip || (n.frame !== undefined ? s.frameLabel(n.frame) +
      (s.frameKind(n.frame) === FRAME_INLINED ? ' (inlined)' : '') : n.name);
    placeTip(p.flameTip, cv.clientWidth, x, y, '<b>' + esc(label) +
      '</b><br>' + fmtBytes(n.bytes) + ' (' + fmtPct(n.bytes, p.flameRoot.bytes) + ') in ' + n.count + ' allocation' +
      (n.count === 1 ? '' : 's'));
  });
  cv.addEventListener('pointerleave', () => { p.flameTip.style.display = 'none'; });
  cv.addEventListener('click', e => {
    const [q] = flameHit(p, e);
    if (!q) return;
    p.flameZoom = q.node === p.flameZoom ? (q.node.parent || p.flameRoot) : q.node;
    drawFlame(p);
  });
}

// ---- segment and block map ---------------------------------------------------------

const MAP_ROWS = 8, MAP_ROW_H = 20;
const POOL_NAMES = ['large pool', 'small pool', 'own segment', 'pool unknown'];

function renderMap(p) {
  const s = p.snap, segs = s.segmentsAt(p.di, p.sel);
  const blocks = p.live.slice().sort((a, b) => s.aAddr[a] - s.aAddr[b]);
  // Each block goes into the segment holding its address; the rest into
  // a last pseudo-segment ("outside the known segments").
  const inSeg = segs.map(() => []), outside = [];
  for (const b of blocks) {
    let lo = 0, hi = segs.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (s.sAddr[segs[m]] <= s.aAddr[b]) lo = m + 1; else hi = m; }
    const k = lo - 1;
    if (k >= 0 && s.aAddr[b] < s.sAddr[segs[k]] + s.sSize[segs[k]]) inSeg[k].push(b); else outside.push(b);
  }
  const parts = segs.map((g, k) => ({seg: g, addr: s.sAddr[g], size: s.sSize[g], blocks: inSeg[k]}));
  if (outside.length) {
    const lo = s.aAddr[outside[0]];
    let hi = lo;
    for (const b of outside) hi = Math.max(hi, s.aAddr[b] + s.aSize[b]);
    let sum = 0;
    for (const b of outside) sum += s.aSize[b];
    parts.push({seg: -1, addr: lo, size: sum, blocks: outside, packed: true});
  }
  let reserved = 0, used = 0;
  for (const q of parts) { reserved += q.seg >= 0 ? q.size : 0; for (const b of q.blocks) used += s.aSize[b]; }
  const pools = {};
  for (const g of segs) { const nm = POOL_NAMES[s.sPool[g] & 3]; pools[nm] = (pools[nm] || 0) + 1; }
  p.mapCap.innerHTML = segs.length + ' segment' + (segs.length === 1 ? '' : 's') +
    (segs.length ? ' (' + Object.entries(pools).map(([k, v]) => v + ' ' + k).join(', ') + ')' : '') +
    ', <span data-testid="map-reserved" data-bytes="' + reserved + '">' + fmtBytes(reserved) + '</span> reserved; ' +
    fmtBytes(used) + ' allocated in ' + blocks.length + ' block' + (blocks.length === 1 ? '' : 's') +
    (reserved > used ? '; ' + fmtBytes(reserved - used) + ' cached or rounding' : '') +
    (outside.length ? '; ' + outside.length + ' outside the known segments' : '') +
    '.  Segments in address order, wrapped over rows; blocks colored by category, grey is free.';

  const [ctx, W] = sizeCanvas(p.mapCanvas, MAP_ROWS * MAP_ROW_H);
  let total = 0;
  for (const q of parts) total += q.size;
  const gap = parts.length * 3 < W * MAP_ROWS / 4 ? 3 : 0;
  const room = W * MAP_ROWS - gap * parts.length;
  const bpp = total / Math.max(room, 1); /* bytes per pixel */
  const span = (a, b, color) => {
    ctx.fillStyle = color;
    while (b - a > 0.01) {
      const row = Math.floor(a / W), x = a - row * W, w = Math.min(b, (row + 1) * W) - a;
      if (row >= MAP_ROWS) break;
      ctx.fillRect(x, row * MAP_ROW_H + 1, Math.max(w, 0.6), MAP_ROW_H - 4);
      a += w;
    }
  };
  let px = 0;
  p.mapParts = parts;
  for (const q of parts) {
    q.px = px;
    q.pw = bpp ? q.size / bpp : 0;
    span(px, px + q.pw, q.seg >= 0 ? '#dfe4ea' : '#fff4e0');
    let off = 0;
    for (const b of q.blocks) {
      const at = q.packed ? off : s.aAddr[b] - q.addr;
      off += s.aSize[b];
      span(px + at / bpp, px + (at + s.aSize[b]) / bpp, CAT_COLOR[s.aCat[b]]);
    }
    span(px, px + Math.min(1, q.pw), '#56606b'); /* segment start */
    px += q.pw + gap;
  }
  if (!parts.length) { ctx.fillStyle = '#5d6875'; ctx.fillText('no segments on this device then', 8, 14); }
}

function bindMap(p) {
  const cv = p.mapCanvas;
  cv.addEventListener('pointermove', e => {
    const r = cv.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    const row = Math.floor(y / MAP_ROW_H), W = cv.clientWidth, pos = row * W + x, s = p.snap;
    const q = (p.mapParts || []).find(z => pos >= z.px && pos < z.px + Math.max(z.pw, 1));
    if (!q) { p.mapTip.style.display = 'none'; return; }
    let html = q.seg >= 0 ? '<b>segment ' + hex(q.addr) + '</b>, ' + fmtBytes(q.size) + ', ' +
      POOL_NAMES[s.sPool[q.seg] & 3] + (s.sPool[q.seg] & 4 ? ', expandable' : '') +
      (s.sSeq[q.seg] >= 0 ? ', made at ' + fmtOffset(s.realTimeOf(s.sSeq[q.seg]) + s.d.origin_ns) : '')
      : '<b>blocks outside the known segments</b> (their segment events were not recorded)';
    const at = (pos - q.px) / Math.max(q.pw, 1) * q.size;
    let off = 0;
    for (const b of q.blocks) {
      const a = q.packed ? off : s.aAddr[b] - q.addr;
      off += s.aSize[b];
      if (at >= a && at < a + s.aSize[b]) {
        const fr = s.siteFrames(s.aStack[b]);
        html += '<br>block ' + hex(s.aAddr[b]) + ', ' + fmtBytes(s.aSize[b]) + ', ' + esc(s.d.categories[s.aCat[b]]) +
          '<br>' + esc(fr.length ? s.frameLabel(fr[0]) : '(no stack)');
        break;
      }
    }
    placeTip(p.mapTip, W, x, y, html);
  });
  cv.addEventListener('pointerleave', () => { p.mapTip.style.display = 'none'; });
}

// ---- top allocation sites ------------------------------------------------------------

function siteTotals(p) {
  const key = p.di;
  if (!p.snap.siteTotals) p.snap.siteTotals = [];
  if (p.snap.siteTotals[key]) return p.snap.siteTotals[key];
  const s = p.snap, m = new Map();
  for (let i = 0; i < s.na; i++) {
    if (s.aDev[i] !== p.di) continue;
    const e = m.get(s.aStack[i]) || {bytes: 0, count: 0};
    e.bytes += s.aSize[i]; e.count++;
    m.set(s.aStack[i], e);
  }
  return (p.snap.siteTotals[key] = m);
}

function renderSites(p) {
  const s = p.snap, totals = siteTotals(p), live = new Map();
  let liveBytes = 0;
  for (const i of p.live) {
    const e = live.get(s.aStack[i]) || {stack: s.aStack[i], bytes: 0, count: 0};
    e.bytes += s.aSize[i]; e.count++; liveBytes += s.aSize[i];
    live.set(s.aStack[i], e);
  }
  // The summary's order: live bytes, live count, total bytes, stack id.
  const sites = [...live.values()].sort((a, b) => b.bytes - a.bytes || b.count - a.count ||
    totals.get(b.stack).bytes - totals.get(a.stack).bytes || a.stack - b.stack);
  const atPeak = p.sel === p.dev.peak_seq && s.n;
  p.sitesTitle.textContent = 'Top allocation sites by bytes live ' + (atPeak ? 'at the peak' : 'then') +
    ' (' + sites.length + ' site' + (sites.length === 1 ? '' : 's') + ')';
  const rows = ['<thead><tr><th class="n">#</th><th class="n">live</th><th class="n">share</th>' +
    '<th class="n">count</th><th class="n">allocated in the window</th><th>innermost frames</th></tr></thead><tbody>'];
  sites.slice(0, 10).forEach((e, k) => {
    const t = totals.get(e.stack);
    rows.push('<tr data-testid="site-row"><td class="n">' + (k + 1) + '</td><td class="n">' + fmtBytes(e.bytes) +
      '</td><td class="n">' + fmtPct(e.bytes, liveBytes) + '</td><td class="n">' + e.count + '</td><td class="n">' +
      fmtBytes(t.bytes) + ' in ' + t.count + '</td><td class="site-frames">' +
      stackHtml(s, e.stack, 3) + '</td></tr>');
  });
  if (sites.length > 10) rows.push('<tr><td></td><td colspan="5">... ' + (sites.length - 10) + ' more sites</td></tr>');
  if (!sites.length) rows.push('<tr><td colspan="6" class="empty">nothing live on this device then</td></tr>');
  p.sitesTable.innerHTML = rows.join('') + '</tbody>';
}
