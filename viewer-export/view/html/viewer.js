/* viewer-export/view/html/viewer.js: the data side of the `tidemark view` page:
 * number formatting (the same rules as viewer-export/model/format_size.c, so the
 * page and `tidemark summary` print the same strings), decoding of the
 * embedded columns (view_data.h), and the per-snapshot queries the views
 * use: time of an event, state at an event, live set, segments, stacks.
 *
 * The viewer*.js files are concatenated, in name order, inside one
 * function scope by viewer.html; tdmMain() (viewer_main.js) starts the page.
 * Positions ("seq") are event indices, -1 being the window start; times
 * are ns from the window start (the first event).
 */

// ---- formatting ------------------------------------------------------------

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

/* printf("%.Nf") of a double (x >= 0): both round the exact binary value,
 * but on an exact tie glibc rounds half to even where Number.toFixed rounds
 * up.  x lies exactly halfway between two N-decimal numbers only when
 * x * 2^(N+1) is an odd integer (0.25 for N = 1, 0.125 for N = 2); a
 * product x * 10^N that merely rounds to k + 0.5 (0.35 * 10) is no tie. */
function fixedN(x, digits) {
  const m = x * Math.pow(2, digits + 1);  // exact: a power of two
  if (!Number.isInteger(m) || m % 2 !== 1) return x.toFixed(digits);
  const f = Math.floor(x * Math.pow(10, digits));
  return ((f % 2 === 0 ? f : f + 1) / Math.pow(10, digits)).toFixed(digits);
}

function fixed2(x) { return fixedN(x, 2); }

function fmtBytes(b) {
  if (b < 0) return '-' + fmtBytes(-b);
  if (b < 1024) return Math.round(b) + ' B';
  let v = b, u = 0;
  while (u + 1 < UNITS.length && v >= 1023.995) { v /= 1024; u++; }
  return fixed2(v) + ' ' + UNITS[u];
}

function fmtExact(b) {
  return b < 1024 && b >= 0 ? fmtBytes(b) : fmtBytes(b) + ' (' + b + ' B)';
}

/* Axis labels: at most three significant digits, no trailing zeros. */
function fmtShort(b) {
  if (b === 0) return '0';
  let v = b, u = 0;
  while (u + 1 < UNITS.length && Math.abs(v) >= 1024) { v /= 1024; u++; }
  return parseFloat(v.toPrecision(3)) + ' ' + UNITS[u];
}

function pad(n, w) { return String(n).padStart(w, '0'); }

/* "+0.000123 s", "+12.345 s", "+2 min 03.456 s", "+1 h 02 min 03 s". */
function fmtOffset(ns) {
  const sign = ns < 0 ? '-' : '+';
  const a = Math.abs(Math.round(ns));
  const s = Math.floor(a / 1e9), frac = a - s * 1e9;
  if (s < 1 && a !== 0 && a < 1e6) return sign + '0.' + pad(Math.floor(frac / 1000), 6) + ' s';
  if (s < 60) return sign + s + '.' + pad(Math.floor(frac / 1e6), 3) + ' s';
  if (s < 3600) return sign + Math.floor(s / 60) + ' min ' + pad(s % 60, 2) + '.' +
    pad(Math.floor(frac / 1e6), 3) + ' s';
  return sign + Math.floor(s / 3600) + ' h ' + pad(Math.floor(s / 60) % 60, 2) + ' min ' +
    pad(s % 60, 2) + ' s';
}

/* A tick label for a time axis whose ticks are `step` ns apart and reach
 * `top` ns: the unit suits the magnitude, the decimals the step. */
function fmtTick(ns, step, top) {
  const units = [[1e9, 's'], [1e6, 'ms'], [1e3, '\u00b5s'], [1, 'ns']];
  for (const [div, name] of units) {
    if (top >= div || div === 1) {
      const digits = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / div) - 1e-9)));
      return (ns / div).toFixed(digits) + ' ' + name;
    }
  }
  return String(ns);
}


function fmtUtc(usText) {
  const us = Number(usText);
  if (!us) return 'unknown';
  return new Date(us / 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

/* A share of a whole as tdm__fmt_share writes it: "12.3%", "<0.1%" for a
 * nonzero part under 0.05%, "0.0%" for none, "-" when whole is 0. */
function fmtPct(part, whole) {
  if (!whole) return '-';
  const p = 100 * part / whole;
  if (part > 0 && p < 0.05) return '<0.1%';
  return (p < 0 ? '-' + fixedN(-p, 1) : fixedN(p, 1)) + '%';
}

/* The change from a to b as `tidemark diff` writes it: "+12.3%", "-<0.1%"
 * (a share of a), "new" from nothing, "" for none. */
function fmtChange(a, b) {
  if (a === b) return '';
  if (!a) return 'new';
  return (b > a ? '+' : '-') + fmtPct(Math.abs(b - a), Math.abs(a));
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, c => ({'&': '&amp;', '<': '&lt;', '>': '&gt;',
    '"': '&quot;', "'": '&#39;'}[c]));
}

function hex(v) { return '0x' + v.toString(16); }

function baseName(p) { const i = p.lastIndexOf('/'); return i < 0 ? p : p.slice(i + 1); }

/* A 1-2-5 step near `raw`. */
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const e = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / e;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * e;
}

// ---- categories and colors ----------------------------------------------------

/* Display and stacking order: static memory at the bottom (as cmd_categories.c). */
const CAT_ORDER = [1, 2, 3, 4, 5, 6, 0];
const CAT_COLOR = ['#a3acb9', '#4e79a7', '#b07aa1', '#f28e2b', '#59a14f', '#76b7b2', '#e8c547'];
const NCAT = 7;

const PHASE_COLORS = {init: '#c9d6e8', data: '#bfe3df', forward: '#cde8c4',
  backward: '#f8d9b5', optimizer: '#e2cfe0', zero_grad: '#e3e3e3', end: '#d9d9d9'};
const PHASE_FALLBACK = ['#f2e3b3', '#d5e5f5', '#f5d5dc', '#d8f0e8', '#e8e0f5', '#f0e8d8'];

function phaseColor(name) {
  if (PHASE_COLORS[name]) return PHASE_COLORS[name];
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return PHASE_FALLBACK[h % PHASE_FALLBACK.length];
}

// ---- decoding ---------------------------------------------------------------------

function b64Bytes(s) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(s);
  const bin = atob(s), n = bin.length, u = new Uint8Array(n);
  for (let i = 0; i < n; i++) u[i] = bin.charCodeAt(i);
  return u;
}

/* n unsigned LEB128 varints into `out` (exact up to 2^53). */
function varints(b64, n, out) {
  const u = b64Bytes(b64 || '');
  let p = 0;
  for (let i = 0; i < n; i++) {
    let b = u[p++];
    if (b < 128) { out[i] = b; continue; }
    let v = b & 127, mul = 128;
    for (;;) {
      b = u[p++];
      v += (b & 127) * mul;
      if (b < 128 || b === undefined) break;
      mul *= 128;
    }
    out[i] = v;
  }
  return out;
}

function unzig(v) { return v % 2 ? -(v + 1) / 2 : v / 2; }

/* First index in the sorted array `a` whose value is > x. */
function upperBound(a, x, lo = 0, hi = a.length) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] <= x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

const NEVER = 2147483647; /* free position of memory live at the dump */
/* Frame kinds of format 1.2 (format/snap_model.h tdm_frame_kind). */
const FRAME_NATIVE = 0, FRAME_INLINED = 1, FRAME_PYTHON = 2;

// ---- one snapshot --------------------------------------------------------------------

class Snapshot {
  constructor(d) {
    this.d = d;
    const N = this.n = d.events, col = d.col, cnt = d.counts;
    const dt = varints(col.ev_t, N, new Float64Array(N));
    const times = this.times = new Float64Array(N);
    let t = 0;
    for (let i = 0; i < N; i++) { t += unzig(dt[i]); times[i] = t; }
    this.tEnd = N ? times[N - 1] : 0;
    this.realTimes = times;
    this.indexAxis = false;

    const nm = cnt.marks;
    this.mkSeq = varints(col.mk_seq, nm, new Int32Array(nm));
    for (let i = 1; i < nm; i++) this.mkSeq[i] += this.mkSeq[i - 1];
    this.mkKind = varints(col.mk_kind, nm, new Uint8Array(nm));
    this.mkVal = varints(col.mk_val, nm, new Float64Array(nm));
    this.splitMarks();

    const na = this.na = cnt.allocs;
    const seq = this.aSeq = varints(col.a_seq, na, new Int32Array(na));
    let s = -1;
    for (let i = 0; i < na; i++) { s += seq[i]; seq[i] = s; }
    const free = this.aFree = varints(col.a_life, na, new Int32Array(na));
    for (let i = 0; i < na; i++) free[i] = free[i] === 0 ? NEVER : seq[i] + free[i];
    /* From aReq[i] on, the allocation waits for a stream to free it. */
    const req = this.aReq = varints(col.a_pend, na, new Int32Array(na));
    for (let i = 0; i < na; i++) req[i] = req[i] === 0 ? NEVER : seq[i] + req[i] - 1;
    const sizeIdx = varints(col.a_size, na, new Int32Array(na));
    this.aSize = new Float64Array(na);
    for (let i = 0; i < na; i++) this.aSize[i] = d.sizes[sizeIdx[i]];
    const cf = varints(col.a_cat, na, new Uint8Array(na));
    this.aCat = new Uint8Array(na);
    this.aFlags = new Uint8Array(na);
    for (let i = 0; i < na; i++) { this.aCat[i] = cf[i] & 7; this.aFlags[i] = cf[i] >> 3; }
    this.aStack = varints(col.a_stack, na, new Int32Array(na));
    this.aAddr = varints(col.a_addr, na, new Float64Array(na));
    let a = 0;
    for (let i = 0; i < na; i++) { a += unzig(this.aAddr[i]); this.aAddr[i] = a; }
    this.aDev = d.devices.length > 1 ? varints(col.a_dev, na, new Uint16Array(na))
      : new Uint16Array(na);

    const ns = this.ns = cnt.segments;
    this.sSeq = varints(col.s_seq, ns, new Int32Array(ns));
    s = -1;
    for (let i = 0; i < ns; i++) { s += this.sSeq[i]; this.sSeq[i] = s; }
    this.sFree = varints(col.s_life, ns, new Int32Array(ns));
    for (let i = 0; i < ns; i++) this.sFree[i] = this.sFree[i] === 0 ? NEVER : this.sSeq[i] + this.sFree[i];
    this.sSize = varints(col.s_size, ns, new Float64Array(ns));
    this.sAddr = varints(col.s_addr, ns, new Float64Array(ns));
    a = 0;
    for (let i = 0; i < ns; i++) { a += unzig(this.sAddr[i]); this.sAddr[i] = a; }
    this.sDev = varints(col.s_dev, ns, new Uint16Array(ns));
    this.sPool = varints(col.s_pool, ns, new Uint8Array(ns));

    this.decodeStacks(cnt.stacks, cnt.frames);
    this.series = [];
  }

  splitMarks() {
    const ph = [], st = [];
    for (let i = 0; i < this.mkSeq.length; i++)
      (this.mkKind[i] ? st : ph).push(i);
    this.phSeq = Int32Array.from(ph, i => this.mkSeq[i]);
    this.phVal = Float64Array.from(ph, i => this.mkVal[i]);
    this.stSeq = Int32Array.from(st, i => this.mkSeq[i]);
    this.stVal = Float64Array.from(st, i => this.mkVal[i]);
  }

  decodeStacks(nst, nfr) {
    const d = this.d;
    // A stack's varints: its depth then its frames; count them first.
    const nv = countVarints(b64Bytes(d.col.st));
    const vals = varints(d.col.st, nv, new Int32Array(nv));
    this.stOff = new Int32Array(nst + 1);
    let p = 0;
    for (let i = 0; i < nst; i++) {
      this.stOff[i] = p + 1;
      p += 1 + vals[p];
    }
    this.stOff[nst] = p + 1;
    this.stVals = vals;
    this.stDepthAt = i => vals[this.stOff[i] - 1];
    const fr = varints(d.col.fr, nfr * 5, new Float64Array(nfr * 5));
    this.frames = fr;
    this.nFrames = nfr;
    /* Per frame its kind (FRAME_*); "fk" is empty when all are native. */
    this.frKind = d.col.fk ? varints(d.col.fk, nfr, new Uint8Array(nfr)) : null;
  }

  /* The chart's x of a position: its time (ns from the first event), or
   * on the event-index axis its index + 1 (the window start at 0), as
   * memory_viz draws allocations one after another whatever the clock. */
  timeOf(seq) { return seq < 0 ? 0 : this.times[Math.min(seq, this.n - 1)]; }
  /* Its time, whichever axis is drawn: what the page prints. */
  realTimeOf(seq) { return seq < 0 ? 0 : this.realTimes[Math.min(seq, this.n - 1)]; }

  setIndexAxis(on) {
    if (on && !this.indexTimes) {
      this.indexTimes = new Float64Array(this.n);
      for (let i = 0; i < this.n; i++) this.indexTimes[i] = i + 1;
    }
    this.indexAxis = !!on;
    this.times = on ? this.indexTimes : this.realTimes;
    this.tEnd = this.n ? this.times[this.n - 1] : 0;
  }

  /* The last event position whose time is <= t (-1 when none). */
  seqAtTime(t) { return upperBound(this.times, t) - 1; }

  phaseAt(seq) {
    const i = upperBound(this.phSeq, seq) - 1;
    return i < 0 ? this.d.phase0 : this.phVal[i];
  }

  stepAt(seq) {
    const i = upperBound(this.stSeq, seq) - 1;
    return i < 0 ? this.d.step0 : this.stVal[i];
  }

  phaseName(id) {
    if (!id) return '';
    return this.d.phases[id] !== undefined ? this.d.phases[id] : '#' + id;
  }

  /* "+0.000514 s (event 156), step 1, phase optimizer" */
  describeSeq(seq) {
    if (!this.n) return 'the dump (final allocator state; no events recorded)';
    const t = fmtOffset(this.realTimeOf(seq) + this.d.origin_ns);
    let out = seq < 0 ? t + ' (window start)' : t + ' (event ' + seq + ')';
    const step = this.stepAt(seq), ph = this.phaseName(this.phaseAt(seq));
    out += step ? ', step ' + step : ', before step 1';
    if (ph) out += ', phase ' + ph;
    return out;
  }

  // ---- frames and stacks

  frameFn(f) { return this.d.strings[this.frames[f * 5]] || ''; }
  frameFile(f) { return this.d.strings[this.frames[f * 5 + 1]] || ''; }
  frameLine(f) { return this.frames[f * 5 + 2]; }
  frameModule(f) { return this.d.strings[this.frames[f * 5 + 3]] || ''; }

  frameKind(f) { return this.frKind && f >= 0 && f < this.nFrames ? this.frKind[f] : FRAME_NATIVE; }
  isPythonFrame(f) { return this.frameKind(f) === FRAME_PYTHON; }

  /* tidemark's own frames say nothing about the program (summary.c). */
  isTidemarkFrame(f) {
    return this.frameFn(f).startsWith('tdm_') || baseName(this.frameModule(f)).startsWith('libtidemark');
  }

  /* Python frames as "train.py:19 Model.forward" (memory_viz's order of
   * file, line and name); native ones as "layer (net.c:7)". */
  frameLabel(f, withFile = true) {
    if (f < 0 || f >= this.nFrames) return '(frame ' + f + ' missing)';
    const fn = this.frameFn(f) || '??', file = this.frameFile(f), line = this.frameLine(f);
    if (this.isPythonFrame(f))
      return withFile ? (baseName(file) || '?') + (line ? ':' + line : '') + ' ' + fn : fn;
    if (fn === '??' && !file)
      return hex(this.frames[f * 5 + 4]) + ' (' + (baseName(this.frameModule(f)) || 'unknown module') + ')';
    if (!withFile) return fn;
    if (file) return fn + ' (' + baseName(file) + (line ? ':' + line : '') + ')';
    return fn + ' (' + (baseName(this.frameModule(f)) || 'unknown module') + ')';
  }

  /* Frame indices of a stack, innermost first, tidemark's own skipped
   * (unless that leaves nothing). */
  stackFrames(id) {
    if (id <= 0 || id >= this.stOff.length - 1) return [];
    const off = this.stOff[id], depth = this.stVals[off - 1];
    const all = Array.from(this.stVals.subarray(off, off + depth));
    let first = 0;
    while (first < all.length && all[first] < this.nFrames && this.isTidemarkFrame(all[first])) first++;
    return first === all.length ? all : all.slice(first);
  }

  /* A stack with Python frames as the page shows it, or null when it has
   * none: its Python frames innermost first, each followed by the native
   * frames between it and the next outer one (the interpreter's), then
   * the native frames outside the outermost (interpreter start, main),
   * then those inside the innermost (the C/C++ it called, e.g. a ctypes
   * or extension call down to the allocator), so that the program's own
   * Python code comes first.  Items: {py: frame} or {native: [frames],
   * where: 'between' | 'outer' | 'inner'}. */
  stackParts(id) {
    const fr = this.stackFrames(id), py = [];
    if (!this.frKind) return null;
    fr.forEach((f, k) => { if (this.isPythonFrame(f)) py.push(k); });
    if (!py.length) return null;
    const parts = [];
    py.forEach((k, j) => {
      parts.push({py: fr[k]});
      const end = j + 1 < py.length ? py[j + 1] : fr.length;
      if (end > k + 1) parts.push({native: fr.slice(k + 1, end), where: j + 1 < py.length ? 'between' : 'outer'});
    });
    if (py[0] > 0) parts.push({native: fr.slice(0, py[0]), where: 'inner'});
    return parts;
  }

  /* The frames that name a stack's site, innermost first: its Python
   * frames when it has any, else all its frames. */
  siteFrames(id) {
    const fr = this.stackFrames(id);
    if (!this.frKind) return fr;
    const py = fr.filter(f => this.isPythonFrame(f));
    return py.length ? py : fr;
  }

  // ---- per device

  deviceIndexOf(ordinal) { return this.d.devices.findIndex(v => v.ordinal === ordinal); }

  series_(di) {
    if (!this.series[di]) this.series[di] = new DeviceSeries(this, di);
    return this.series[di];
  }

  /* Indices of allocations of device di live just after `seq`, largest first. */
  liveAt(di, seq) {
    const out = [];
    const {aSeq, aFree, aDev} = this;
    for (let i = 0; i < this.na; i++)
      if (aDev[i] === di && aSeq[i] <= seq && seq < aFree[i]) out.push(i);
    const size = this.aSize;
    out.sort((x, y) => size[y] - size[x] || this.aAddr[x] - this.aAddr[y]);
    return out;
  }

  /* Indices of segments of device di live just after `seq`, by address. */
  segmentsAt(di, seq) {
    const out = [];
    for (let i = 0; i < this.ns; i++)
      if (this.sDev[i] === di && this.sSeq[i] <= seq && seq < this.sFree[i]) out.push(i);
    out.sort((x, y) => this.sAddr[x] - this.sAddr[y]);
    return out;
  }
}

/* One device's timeline: +/- bytes per category at event positions,
 * sorted, with a checkpoint of the running state every CK changes so the
 * state at any position costs at most CK steps. */
const CK = 512;

class DeviceSeries {
  constructor(snap, di) {
    this.snap = snap;
    const N = snap.n, {aSeq, aFree, aDev, aSize, aCat} = snap;
    const count = new Int32Array(N + 2);
    let nd = 0;
    for (let i = 0; i < snap.na; i++) {
      if (aDev[i] !== di) continue;
      count[aSeq[i] + 1]++; nd++;
      if (aFree[i] !== NEVER) { count[aFree[i] + 1]++; nd++; }
    }
    let acc = 0;
    for (let k = 0; k < N + 2; k++) { const c = count[k]; count[k] = acc; acc += c; }
    const dSeq = this.dSeq = new Int32Array(nd), dCat = this.dCat = new Uint8Array(nd);
    const dBytes = this.dBytes = new Float64Array(nd);
    for (let i = 0; i < snap.na; i++) {
      if (aDev[i] !== di) continue;
      let j = count[aSeq[i] + 1]++;
      dSeq[j] = aSeq[i]; dCat[j] = aCat[i]; dBytes[j] = aSize[i];
      if (aFree[i] !== NEVER) {
        j = count[aFree[i] + 1]++;
        dSeq[j] = aFree[i]; dCat[j] = aCat[i]; dBytes[j] = -aSize[i];
      }
    }
    this.nd = nd;
    const nck = Math.floor(nd / CK) + 1;
    const ck = this.ck = new Float64Array(nck * NCAT);
    const cur = new Float64Array(NCAT);
    let peak = -Infinity, peakSeq = -1, tot = 0;
    for (let j = 0; j < nd; j++) {
      if (j % CK === 0) ck.set(cur, (j / CK) * NCAT);
      cur[dCat[j]] += dBytes[j];
      tot += dBytes[j];
      if ((j + 1 === nd || dSeq[j + 1] !== dSeq[j]) && tot > peak) { peak = tot; peakSeq = dSeq[j]; }
    }
    if (nd % CK === 0) ck.set(cur, (nd / CK) * NCAT);
    this.peak = nd ? peak : 0;
    this.peakSeq = peakSeq;

    const dev = snap.d.devices[di];
    const nv = countVarints(b64Bytes(dev.rs));
    const rv = varints(dev.rs, nv, new Float64Array(nv));
    const nrs = Math.floor(nv / 2);
    this.rsSeq = new Int32Array(nrs);
    this.rsVal = new Float64Array(nrs);
    let sq = -1, val = 0;
    for (let k = 0; k < nrs; k++) {
      sq += rv[2 * k]; val += unzig(rv[2 * k + 1]);
      this.rsSeq[k] = sq; this.rsVal[k] = val;
    }
    this.reservedKnown = !!dev.reserved_known;
  }

  /* Bytes per category just after `seq` into out (length NCAT); returns the total. */
  stateAt(seq, out) {
    const idx = upperBound(this.dSeq, seq);
    const c = Math.floor(idx / CK);
    for (let k = 0; k < NCAT; k++) out[k] = this.ck[c * NCAT + k];
    for (let j = c * CK; j < idx; j++) out[this.dCat[j]] += this.dBytes[j];
    let tot = 0;
    for (let k = 0; k < NCAT; k++) tot += out[k];
    return tot;
  }

  reservedAt(seq) {
    const i = upperBound(this.rsSeq, seq) - 1;
    return i < 0 ? 0 : this.rsVal[i];
  }

  /* The previous / next position where this device's allocated bytes change. */
  prevChange(seq) { const i = upperBound(this.dSeq, seq - 1) - 1; return i < 0 ? -1 : this.dSeq[i]; }
  nextChange(seq) { const i = upperBound(this.dSeq, seq); return i < this.nd ? this.dSeq[i] : seq; }

  /* Level of detail: W columns over times [t0, t1).  Each column gets the
   * highest state reached in it (its categories, its position), the lowest
   * total, the number of changes, and the highest reserved value; columns
   * outside the recorded window get seq -2.  Cost: the changes in range. */
  columns(t0, t1, W) {
    const snap = this.snap, times = snap.times;
    const res = {W, max: new Float64Array(W), min: new Float64Array(W), cats: new Float64Array(W * NCAT),
      seq: new Int32Array(W).fill(-2), n: new Int32Array(W), rmax: new Float64Array(W), first: 0, last: -1};
    const dt = (t1 - t0) / W;
    const first = t0 < 0 ? Math.min(W, Math.ceil(-t0 / dt)) : 0;
    const last = Math.min(W - 1, Math.floor((snap.tEnd - t0) / dt));
    res.first = first; res.last = last;
    if (first > last) return res;
    const cur = new Float64Array(NCAT);
    let curSeq = snap.seqAtTime(t0 + first * dt);
    let tot = this.stateAt(curSeq, cur);
    const {dSeq, dCat, dBytes, nd} = this;
    let j = upperBound(dSeq, curSeq);
    let c = first;
    const setCol = (col) => {
      res.max[col] = tot; res.min[col] = tot; res.seq[col] = curSeq;
      res.cats.set(cur, col * NCAT);
    };
    setCol(c);
    while (j < nd) {
      const s = dSeq[j];
      const t = s < 0 ? 0 : times[s];
      let p = Math.floor((t - t0) / dt);
      if (p > last) break;
      if (p < c) p = c; /* clocks of racing threads may step back a little */
      while (c < p) setCol(++c);
      do { cur[dCat[j]] += dBytes[j]; tot += dBytes[j]; j++; } while (j < nd && dSeq[j] === s);
      curSeq = s;
      res.n[c]++;
      if (tot > res.max[c]) { res.max[c] = tot; res.seq[c] = s; res.cats.set(cur, c * NCAT); }
      if (tot < res.min[c]) res.min[c] = tot;
    }
    while (c < last) setCol(++c);

    // reserved: the same walk over its (fewer) changes
    const {rsSeq, rsVal} = this;
    let k = upperBound(rsSeq, snap.seqAtTime(t0 + first * dt)) - 1;
    let rv = k < 0 ? 0 : rsVal[k];
    c = first;
    res.rmax[c] = rv;
    for (k = k + 1; k < rsSeq.length; k++) {
      const t = rsSeq[k] < 0 ? 0 : times[rsSeq[k]];
      let p = Math.floor((t - t0) / dt);
      if (p > last) break;
      if (p < c) p = c;
      while (c < p) res.rmax[++c] = rv;
      rv = rsVal[k];
      if (rv > res.rmax[c]) res.rmax[c] = rv;
    }
    while (c < last) res.rmax[++c] = rv;
    return res;
  }
}

function countVarints(u) {
  let n = 0;
  for (let i = 0; i < u.length; i++) if (u[i] < 128) n++;
  return n;
}
