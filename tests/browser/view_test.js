#!/usr/bin/env node
/* tests/browser/view_test.js: `tidemark view` end to end in a real browser.
 *
 * Records the demo program ($TRAIN_SIM) with TIDEMARK_CONF=dump=..., writes
 * the page with `tidemark view`, opens it in headless Chromium (Debian's
 * chromium, driven by playwright-core) with every network request counted,
 * and checks against `tidemark summary` of the same file: the peak shown,
 * when it happened, the live list at the peak (clicked on the chart), at
 * another clicked time and at the end, a stack, the block map's reserved
 * bytes, the top sites; zoom, pan and hover; then two snapshots side by
 * side; then the ranks of a job (four train_sim ranks run side by side,
 * `tidemark view DIR`): one lane per rank in rank order, each lane's peak
 * against `tidemark summary` of its file, the lanes' time offsets against
 * the ranks' own CSV exports (absolute times), the detail panel on the same
 * time axis as the lanes, clicking a lane, zooming, panning and keys; and
 * a 24-rank job that decodes and draws only the lanes in view; and a
 * Python program recorded with stacks="all" (pyframes_prog.py): its
 * stacks show the Python frames first as file:line function, the native
 * runs folded with their counts, opening on a click; an allocation in
 * inlined code (inlined_prog.c) whose inlined frame is tagged.
 * Screenshots go to $TDM_BROWSER_OUT (default: the working folder).
 *
 * Environment: TIDEMARK, TRAIN_SIM, INLINED_PROG (programs), CHROMIUM (browser path);
 * PYTHON3, LIBTIDEMARK, TDM_SOURCE_DIR for the Python part (it says
 * SKIPPED and the rest runs when PYTHON3 is unset: no /usr/bin/python3,
 * or a sanitizer build).
 * Exit 0 pass, 1 fail, 77 skipped (playwright-core or chromium missing).
 */
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const {execFileSync, spawn, spawnSync} = require('child_process');

let chromium;
try {
  ({chromium} = require('playwright-core'));
} catch (e) {
  console.log('SKIPPED: playwright-core is not installed (npm ci --prefix tests/browser)');
  process.exit(77);
}
const TIDEMARK = process.env.TIDEMARK, TRAIN_SIM = process.env.TRAIN_SIM;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
if (!TIDEMARK || !TRAIN_SIM) { console.error('TIDEMARK and TRAIN_SIM must be set'); process.exit(1); }
if (!fs.existsSync(CHROMIUM)) { console.log('SKIPPED: no chromium at ' + CHROMIUM); process.exit(77); }

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tdm-browser-'));
const outDir = process.env.TDM_BROWSER_OUT || process.cwd();
let failures = 0, checks = 0;

function check(ok, what, detail) {
  checks++;
  if (ok) console.log('ok ' + checks + ' - ' + what + (process.env.TDM_TEST_VERBOSE && detail !== undefined ? ': ' + detail : ''));
  else { failures++; console.log('not ok ' + checks + ' - ' + what + (detail !== undefined ? ': ' + detail : '')); }
}

function run(prog, args, env) {
  return execFileSync(prog, args, {env: {...process.env, TIDEMARK_CONF: '', ...env}, encoding: 'utf8'});
}

/* `tidemark view ARGS`: what it said (its "wrote" line is a diagnostic,
 * on stderr) and its stdout; a failed view throws, as run() does. */
function viewSaid(args) {
  const r = spawnSync(TIDEMARK, ['view', ...args], {env: {...process.env, TIDEMARK_CONF: ''}, encoding: 'utf8'});
  if (r.status !== 0)
    throw new Error('tidemark view ' + args.join(' ') + ': exit ' + r.status + ': ' + r.stderr);
  return {said: r.stderr, stdout: r.stdout};
}

/* Runs ranks 0..n-1 of a job side by side, as a launcher would. */
async function recordJob(dir, n, argsOf, batch = 8) {
  fs.mkdirSync(dir, {recursive: true});
  for (let first = 0; first < n; first += batch) {
    const runs = [];
    for (let r = first; r < Math.min(n, first + batch); r++) {
      runs.push(new Promise((resolve, reject) => {
        const p = spawn(TRAIN_SIM, argsOf(r), {stdio: 'ignore', env: {...process.env,
          RANK: String(r), WORLD_SIZE: String(n), TIDEMARK_CONF: 'dump=' + path.join(dir, 'r%r.tdm')}});
        p.on('exit', code => (code === 0 ? resolve() : reject(new Error('rank ' + r + ' exited ' + code))));
      }));
    }
    await Promise.all(runs);
  }
}

/* µs of the day of the first allocation in a snapshot, from its CSV export. */
function firstAllocUs(file) {
  const csv = run(TIDEMARK, ['export', '-q', '--format', 'csv', '-o', '-', file]);
  const m = csv.match(/^\d+,(\d\d):(\d\d):(\d\d)\.(\d{6}),allocate,/m);
  if (!m) throw new Error('no allocation in the CSV of ' + file);
  return ((Number(m[1]) * 60 + Number(m[2])) * 60 + Number(m[3])) * 1e6 + Number(m[4]);
}

/* The figures `tidemark summary` prints for device 0. */
function summaryOf(file) {
  const out = run(TIDEMARK, ['summary', '--top', '1000', file]);
  const m = (re) => { const r = out.match(re); if (!r) throw new Error('summary lacks ' + re + '\n' + out); return r; };
  const peak = m(/peak allocated +(.+)\n/);
  const sites = [...out.matchAll(/^ +\d+ +(\S+ \S+) +[<\d.]+% +(\d+)  /gm)];
  return {
    text: out,
    peakText: peak[1].replace(/, [<\d.]+% of capacity$/, ''),
    peakBytes: Number(m(/peak allocated .*\((\d+) B\)/)[1]),
    peakWhen: m(/peak at +(.+)\n/)[1],
    reservedAtPeak: m(/reserved +(\S+ \S+) at the peak/)[1],
    endBytes: Number(m(/live at end +.*\((\d+) B\)/)[1]),
    endCount: Number(m(/live at end .* in (\d+) allocation/)[1]),
    dropped: Number(m(/events +\d+ recorded, (\d+) dropped/)[1]),
    liveCount: sites.reduce((a, r) => a + Number(r[2]), 0),
    firstSite: sites.length ? sites[0][1] : '',
    siteCount: sites.length,
  };
}

async function openPage(browser, file) {
  const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
  const errors = [], requests = [];
  page.on('pageerror', e => errors.push(e.message));
  page.on('console', msg => { if (msg.type() === 'error') errors.push(msg.text()); });
  page.on('request', r => { if (!r.url().startsWith('file:')) requests.push(r.url()); });
  await page.route(/^(?!file:)/, route => route.abort());
  await page.goto('file://' + file);
  await page.waitForSelector('body[data-ready="1"]', {timeout: 60000});
  return {page, errors, requests};
}

async function liveState(page, panel = 0) {
  return page.evaluate((i) => {
    const root = document.querySelectorAll('.panel')[i];
    const total = root.querySelector('[data-testid=live-total]');
    const rows = [...root.querySelectorAll('[data-testid=live-row]')].map(r => Number(r.dataset.bytes));
    return {bytes: Number(total.dataset.bytes), count: Number(total.dataset.count), rows,
      text: root.querySelector('[data-testid=selection]').textContent, sel: window.tidemarkView.panels[i].sel};
  }, panel);
}

/* Clicks the chart of `panel` where position seq is drawn. */
async function clickSeq(page, seq, panel = 0) {
  const canvas = page.locator('.panel').nth(panel).locator('canvas.chart');
  const box = await canvas.boundingBox();
  const x = await page.evaluate(([i, s]) => window.tidemarkView.panels[i].xOfSeq(s), [panel, seq]);
  await page.mouse.click(box.x + x, box.y + box.height / 2);
}

function sortedDesc(a) { return a.every((v, i) => i === 0 || a[i - 1] >= v); }

/* The line numbers pyframes_prog.py marks with '# L:name'. */
function markedLines(file) {
  const lines = {};
  fs.readFileSync(file, 'utf8').split('\n').forEach((t, k) => {
    const m = t.match(/# L:(\w+)/);
    if (m) lines[m[1]] = k + 1;
  });
  return lines;
}

/* A Python program's stacks (stacks=all: Python frames among native
 * ones): Python frames first, native runs folded where they are. */
async function pythonStacks(browser) {
  const PY = process.env.PYTHON3;
  if (!PY) { console.log('# SKIPPED the Python part: PYTHON3 is not set (no /usr/bin/python3)'); return; }
  const prog = path.join(__dirname, 'pyframes_prog.py'), L = markedLines(prog);
  const tdm = path.join(work, 'py.tdm'), html = path.join(work, 'py.html');
  run(PY, [prog, tdm], {TIDEMARK_LIB: process.env.LIBTIDEMARK, TDM_SOURCE_DIR: process.env.TDM_SOURCE_DIR});
  run(TIDEMARK, ['view', tdm, '-o', html]);
  const {page, errors, requests} = await openPage(browser, html);
  const at = (name, fn) => 'pyframes_prog.py:' + L[name] + ' ' + fn;
  // The largest allocation (4 MiB) is the one map() made: its stack has
  // interpreter frames between build_layer and build_model.
  const row = page.locator('[data-testid=live-row]').first();
  check(Number(await row.getAttribute('data-bytes')) === 4 << 20, 'Python: the largest allocation is listed first');
  check(await row.locator('td').nth(4).textContent() === 'allocate \u2190 build_layer \u2190 build_model',
    'Python: the site column names the innermost Python functions', await row.locator('td').nth(4).textContent());
  await row.click();
  const cell = page.locator('[data-testid=live-stack] td').nth(1);
  const items = await cell.evaluate(td => [...td.children].slice(1).map(e => ({
    py: e.dataset.testid === 'py-frame', text: e.dataset.testid === 'py-frame' ? e.textContent : '',
    count: Number(e.dataset.count || 0), open: !!e.open, summary: e.querySelector('summary') ?
      e.querySelector('summary').textContent : '', frames: e.querySelectorAll('.frame').length})));
  const py = items.filter(q => q.py).map(q => q.text);
  check(py.length === 4 && py[0] === at('allocate', 'allocate') && py[1] === at('build_layer', 'build_layer') &&
    py[2] === at('build_model_map', 'build_model') && /^pyframes_prog\.py:\d+ <module>$/.test(py[3]),
    'Python: the stack lists the Python frames innermost first as file:line function', JSON.stringify(py));
  check(items.length > 0 && items[0].py, 'Python: the stack starts with the innermost Python frame',
    JSON.stringify(items[0]));
  const groups = items.filter(q => !q.py);
  check(groups.length === 3 && groups.every(q => !q.open && q.count > 0 && q.frames === q.count &&
    q.summary.startsWith(q.count + ' native frame')), 'Python: native runs are folded under "N native frames"',
    JSON.stringify(groups));
  // between build_layer and build_model (map), outside <module>, inside allocate (ctypes)
  const kinds = items.map(q => (q.py ? 'P' : 'N')).join('');
  check(kinds === 'PPNPPNN', 'Python: each native run sits where it is in the stack', kinds);
  check(/called from allocate$/.test(groups[2].summary), 'Python: the C code below the innermost Python frame says so',
    groups[2].summary);
  const hidden = cell.locator('[data-testid=native-group]').nth(1).locator('.frame').first();
  check(!(await hidden.isVisible()), 'Python: folded native frames are hidden');
  await cell.locator('[data-testid=native-group] > summary').nth(1).click();
  const opened = await cell.locator('[data-testid=native-group]').nth(1).evaluate(e => e.open);
  const shown = await cell.locator('[data-testid=native-group]').nth(1).locator('.frame').allTextContents();
  check(opened && await hidden.isVisible() && shown.length === groups[1].count &&
    shown.some(t => /^Py_RunMain /.test(t)), 'Python: clicking a group shows its native frames', shown.join(' | '));
  const siteFirst = await page.locator('[data-testid=site-row]').first().locator('[data-testid=py-frame]').first().textContent();
  check(siteFirst === at('allocate', 'allocate'), 'Python: the top site starts with its innermost Python frame',
    siteFirst);
  const flame = await page.evaluate(() => {
    const p = window.tidemarkView.panels[0], names = [];
    for (let n = p.flameRoot; n.kids.size; ) {
      n = [...n.kids.values()].sort((a, b) => b.bytes - a.bytes)[0];
      names.push(n.name);
    }
    return names;
  });
  check(flame.length === 5 && /<module>$/.test(flame[0]) && flame[3] === at('allocate', 'allocate') &&
    flame[4] === 'native frames', 'Python: the flame graph stacks the Python frames, then their native code',
    JSON.stringify(flame));
  await page.screenshot({path: path.join(outDir, 'python.png'), fullPage: true});
  check(errors.length === 0 && requests.length === 0, 'Python: no errors, no requests', errors.concat(requests).join('; '));
}

/* A frame the compiler inlined (inlined_prog.c) carries an "inlined" tag;
 * its stack, without Python frames, is listed one frame a line. */
async function inlinedFrames(browser) {
  const tdm = path.join(work, 'inlined.tdm'), html = path.join(work, 'inlined.html');
  run(process.env.INLINED_PROG, [], {TIDEMARK_CONF: 'dump=' + tdm});
  run(TIDEMARK, ['view', tdm, '-o', html]);
  const {page, errors} = await openPage(browser, html);
  await page.locator('[data-testid=live-row]').first().click();
  const cell = page.locator('[data-testid=live-stack] td').nth(1);
  const lines = (await cell.evaluate(td => td.innerText)).split('\n');
  const tags = await cell.locator('[data-testid=inlined]').count();
  check(/^grab_inlined \(inlined_prog\.c:\d+\) inlined$/.test(lines[1]) && /^make_buffer /.test(lines[2]) &&
    tags === 1, 'an inlined frame is tagged "inlined", the frame it sits in is not', JSON.stringify(lines));
  check(await cell.locator('[data-testid=native-group]').count() === 0 && errors.length === 0,
    'inlined: nothing folded, no errors', errors.join('; '));
}

/* The time axes: lanes open on the span with events, not on the long
 * start-up before them; a panel offers the event-index axis. */
async function timeAxes(browser, aFile) {
  const job = path.join(work, 'slow-start');
  await recordJob(job, 2, r => ['--steps', '2', '--layers', '2', '--hidden', '512', '--compute-us', '0',
    '--startup-ms', '600']);
  const html = path.join(work, 'slow-start.html');
  run(TIDEMARK, ['view', job, '-o', html]);
  const {page, errors} = await openPage(browser, html);
  const v = await page.evaluate(() => {
    const r = window.tidemarkView.ranks;
    const first = Math.min(...r.lanes.map(l => l.off)), last = Math.max(...r.lanes.map(l => l.off + r.snapOf(l).tEnd));
    return {t0: r.t0, t1: r.t1, first, last};
  });
  check(v.first > 5e8 && v.t0 > 0.9 * v.first && (v.last - v.first) / (v.t1 - v.t0) > 0.9,
    'lanes open on the span with events, not on the start-up before them', JSON.stringify(v));
  check(errors.length === 0, 'slow start: no errors', errors.join('; '));

  // lanes are named by rank, after their folder when there are several;
  // a snapshot without a rank by its process, not its file's name
  const other = path.join(work, 'other');
  fs.mkdirSync(other);
  fs.copyFileSync(path.join(job, 'r0.tdm'), path.join(other, 'r0.tdm'));
  fs.copyFileSync(aFile, path.join(other, 'plain.tdm'));
  const lhtml = path.join(work, 'labels.html');
  run(TIDEMARK, ['view', job, other, '-o', lhtml]);
  const lp = await openPage(browser, lhtml);
  const names = await lp.page.evaluate(() => window.tidemarkView.ranks.lanes.map(l => l.label));
  check(names.includes('slow-start rank 0') && names.includes('other rank 0') &&
    names.some(x => /^other pid \d+$/.test(x)) && !names.some(x => /tidemark|\.tdm/.test(x)),
    'lanes are named by folder and rank (or process)', names.join(' | '));

  // one snapshot on the event-index axis: events evenly spaced
  const one = path.join(job, 'r0.tdm'), ohtml = path.join(work, 'index.html');
  run(TIDEMARK, ['view', one, '-o', ohtml]);
  const o = await openPage(browser, ohtml);
  const before = await o.page.evaluate(() => { const p = window.tidemarkView.panels[0]; return {t1: p.t1, n: p.snap.n}; });
  await o.page.locator('[data-testid=index-axis]').check();
  const ix = await o.page.evaluate(() => {
    const p = window.tidemarkView.panels[0], s = p.snap, n = s.n;
    const xs = [0, n >> 2, n >> 1, n - 1].map(k => p.xOf(s.timeOf(k)));
    return {t0: p.t0, t1: p.t1, n, xs, when: s.describeSeq(n >> 1)};
  });
  const d1 = ix.xs[2] - ix.xs[1], d0 = ix.xs[1] - ix.xs[0];
  check(ix.t1 < before.n * 1.1 && ix.t1 >= ix.n && Math.abs(d1 - d0) <= 1 && /^\+\d/.test(ix.when),
    'the event-index axis spaces events evenly and still prints their times', JSON.stringify(ix));
  const tip = await (async () => {
    const box = await o.page.locator('canvas.chart').first().boundingBox();
    await o.page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2);
    return o.page.locator('.chart-box .tip').first().textContent();
  })();
  check(/event \d+/.test(tip) && /from the recording start/.test(tip), 'hover on the index axis names the event and its time', tip);
  await o.page.locator('[data-testid=index-axis]').uncheck();
  const back = await o.page.evaluate(() => window.tidemarkView.panels[0].t1);
  check(Math.abs(back - before.t1) < 1e-6 * before.t1, 'unchecking returns to the time axis', back + ' vs ' + before.t1);
  check(o.errors.length === 0, 'index axis: no errors', o.errors.join('; '));
}

async function main() {
  const a = path.join(work, 'train.tdm'), b = path.join(work, 'small.tdm');
  run(TRAIN_SIM, ['--steps', '5'], {TIDEMARK_CONF: 'dump=' + a});
  run(TRAIN_SIM, ['--steps', '3', '--layers', '4', '--hidden', '1024'], {TIDEMARK_CONF: 'mode=cache,dump=' + b});
  const sa = summaryOf(a), sb = summaryOf(b);
  const html = path.join(work, 'view.html');
  const viewed = viewSaid([a, '-o', html]);
  const said = viewed.said;
  check(viewed.stdout === '', 'tidemark view prints nothing on stdout', viewed.stdout);
  check(/wrote .*view\.html .*bytes per event/.test(said), 'tidemark view reports what it wrote', said.trim());
  const text = fs.readFileSync(html, 'utf8');
  check(!/<(script|link|img|iframe)[^>]+(src|href)=/i.test(text), 'the page loads no external resource');
  check(text.includes("default-src 'none'"), 'the page forbids network access (CSP)');

  const browser = await chromium.launch({executablePath: CHROMIUM,
    args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []});
  try {
    const {page, errors, requests} = await openPage(browser, html);
    // ---- summary header against `tidemark summary`
    const peak = page.locator('[data-testid=peak]').first();
    check(await peak.textContent() === sa.peakText, 'peak shown equals the summary\'s',
      (await peak.textContent()) + ' vs ' + sa.peakText);
    check(Number(await peak.getAttribute('data-bytes')) === sa.peakBytes, 'peak bytes equal the summary\'s');
    const when = await page.locator('[data-testid=peak-when]').first().textContent();
    check(when === sa.peakWhen, 'peak time, step and phase equal the summary\'s', when + ' vs ' + sa.peakWhen);
    check(Number(await page.locator('[data-testid=dropped]').first().textContent()) === sa.dropped,
      'dropped events shown');
    const chartPeak = await page.evaluate(() => window.tidemarkView.panels[0].series.peak);
    check(chartPeak === sa.peakBytes, 'the timeline drawn peaks at the summary\'s peak', chartPeak);

    // ---- another time, clicked: the list is that time's live set
    const other = await page.evaluate(() => {
      const p = window.tidemarkView.panels[0];
      /* a change of memory during the first forward pass */
      return p.series.nextChange(Math.floor(p.dev.peak_seq / 3));
    });
    await clickSeq(page, other);
    let st = await liveState(page);
    const expectOther = await page.evaluate((s) => {
      const p = window.tidemarkView.panels[0];
      return p.series.stateAt(s, new Float64Array(7));
    }, st.sel);
    const samePixel = await page.evaluate(([x, y]) => {
      const p = window.tidemarkView.panels[0];
      /* the page rounds the pointer to its own pixel grid: allow one column */
      return Math.abs(Math.floor(p.xOfSeq(x)) - Math.floor(p.xOfSeq(y))) <= 1;
    }, [other, st.sel]);
    check(samePixel && st.bytes < sa.peakBytes && st.bytes > 0, 'clicking an earlier time selects it',
      JSON.stringify(st));
    check(st.bytes === expectOther, 'live list total equals the timeline at the clicked time');
    check(st.rows.reduce((x, y) => x + y, 0) === st.bytes && st.rows.length === st.count,
      'live list rows add up to the total');
    check(sortedDesc(st.rows), 'live list is largest first');

    // ---- the peak, clicked
    const peakSeq = await page.evaluate(() => window.tidemarkView.panels[0].dev.peak_seq);
    await clickSeq(page, peakSeq);
    st = await liveState(page);
    check(st.bytes === sa.peakBytes, 'clicking the peak lists the summary\'s peak bytes', st.bytes);
    check(st.count === sa.liveCount, 'clicking the peak lists as many allocations as the summary\'s sites hold',
      st.count + ' vs ' + sa.liveCount);
    check(sortedDesc(st.rows) && st.rows.reduce((x, y) => x + y, 0) === sa.peakBytes, 'peak list rows add up, largest first');
    await page.locator('[data-testid=live-row]').first().click();
    const stack = await page.locator('[data-testid=live-stack]').first().textContent();
    check(/train_sim\.c:\d+/.test(stack) && /\bmain\b/.test(stack), 'a row opens its stack', stack);
    const folded = await page.locator('[data-testid=live-stack] [data-testid=native-group]').count() +
      await page.locator('[data-testid=sites] [data-testid=native-group]').count();
    check(folded === 0, 'a stack without Python frames folds nothing', folded);
    const reserved = await page.locator('[data-testid=map-reserved]').first().textContent();
    check(reserved === sa.reservedAtPeak, 'block map holds the summary\'s reserved bytes at the peak',
      reserved + ' vs ' + sa.reservedAtPeak);
    const sites = await page.locator('[data-testid=site-row]').count();
    check(sites === Math.min(10, sa.siteCount), 'top sites table lists the sites live at the peak', sites);
    const site1 = await page.locator('[data-testid=site-row]').first().locator('td').nth(1).textContent();
    check(site1 === sa.firstSite, 'top site equals the summary\'s', site1 + ' vs ' + sa.firstSite);
    const flameOk = await page.evaluate(() => {
      const p = window.tidemarkView.panels[0];
      return p.flameRoot.bytes === p.live.reduce((x, i) => x + p.snap.aSize[i], 0) && p.flameRects.length > 3;
    });
    check(flameOk, 'flame graph holds the live bytes');
    await page.screenshot({path: path.join(outDir, 'view.png'), fullPage: true});

    // ---- the end of the history, by keyboard
    await page.locator('canvas.chart').first().focus();
    await page.keyboard.press('End');
    st = await liveState(page);
    check(st.bytes === sa.endBytes && st.count === sa.endCount, 'End selects the state at the dump',
      st.bytes + '/' + st.count + ' vs ' + sa.endBytes + '/' + sa.endCount);

    // ---- zoom, pan, hover
    const canvas = page.locator('canvas.chart').first();
    const box = await canvas.boundingBox();
    const span0 = await page.evaluate(() => { const p = window.tidemarkView.panels[0]; return p.t1 - p.t0; });
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await page.mouse.wheel(0, -400);
    const span1 = await page.evaluate(() => { const p = window.tidemarkView.panels[0]; return p.t1 - p.t0; });
    check(span1 < span0 * 0.75, 'wheel zooms in', span0 + ' -> ' + span1);
    const t0 = await page.evaluate(() => window.tidemarkView.panels[0].t0);
    await page.mouse.move(box.x + box.width / 2, box.y + 100);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width / 2 - 200, box.y + 100, {steps: 5});
    await page.mouse.up();
    const t0b = await page.evaluate(() => window.tidemarkView.panels[0].t0);
    check(t0b > t0, 'dragging pans', t0 + ' -> ' + t0b);
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
    const tip = await page.locator('.chart-box .tip').first().textContent();
    check(/allocated/.test(tip) && /\+0\.\d+ s/.test(tip), 'hovering shows time and totals', tip);
    check(errors.length === 0, 'no errors in the page', errors.join('; '));
    check(requests.length === 0, 'no network request', requests.join(' '));

    // ---- two snapshots side by side
    const cmp = path.join(work, 'compare.html');
    run(TIDEMARK, ['view', a, b, '-o', cmp]);
    const two = await openPage(browser, cmp);
    const peaks = await two.page.locator('[data-testid=peak]').evaluateAll(els => els.map(e => e.textContent));
    check(peaks.length === 2 && peaks[0] === sa.peakText && peaks[1] === sb.peakText,
      'side by side: each panel shows its own summary\'s peak', peaks.join(' | '));
    const panels = await two.page.locator('.panel').count();
    const live2 = await liveState(two.page, 1);
    check(panels === 2 && live2.bytes === sb.peakBytes, 'side by side: the second panel selects its own peak');
    // The caching allocator requests every free before completing it; at
    // the peak nothing live has had its free requested yet.
    const pending = await two.page.locator('.panel').nth(1).locator('[data-testid=live-row]', {hasText: 'free pending'}).count();
    check(live2.rows.length > 0 && pending === 0, 'side by side: no live row at the peak says "free pending"',
      pending + ' of ' + live2.rows.length);
    // the header compares reserved too (replay --save's runs differ only there)
    const cmpHead = await two.page.evaluate(() => {
      const [x, y] = window.tidemarkView.panels.map(p => p.dev);
      const span = document.querySelector('[data-testid=reserved-diff]');
      return {text: document.getElementById('compare').textContent, known: x.reserved_known && y.reserved_known,
        got: span ? Number(span.dataset.bytes) : NaN, want: y.peak_reserved - x.peak_reserved};
    });
    check(cmpHead.known && cmpHead.got === cmpHead.want && /peak allocated: .*peak reserved: /.test(cmpHead.text),
      'side by side: the header compares peak allocated and peak reserved', cmpHead.text);
    check(two.errors.length === 0 && two.requests.length === 0, 'side by side: no errors, no requests',
      two.errors.concat(two.requests).join('; '));
    await two.page.screenshot({path: path.join(outDir, 'compare.png'), fullPage: true});

    // ---- the ranks of a job: lanes on one time axis, one rank in detail
    const job = path.join(work, 'job');
    await recordJob(job, 4, r => ['--steps', '3', '--layers', '4', '--hidden', String(1024 + 512 * r)]);
    const files = [0, 1, 2, 3].map(r => path.join(job, 'r' + r + '.tdm'));
    const sums = files.map(summaryOf);
    const rhtml = path.join(work, 'ranks.html');
    const rsaid = viewSaid([job, '-o', rhtml]).said;
    check(/4 ranks on one time axis/.test(rsaid), 'tidemark view DIR lays out ranks', rsaid.trim());
    const rk = await openPage(browser, rhtml);
    const rp = rk.page;
    const lanes = await rp.locator('[data-testid=lane]').evaluateAll(els =>
      els.map(e => ({rank: Number(e.dataset.rank), peak: Number(e.dataset.peak)})));
    check(lanes.map(l => l.rank).join() === '0,1,2,3', 'one lane per rank, in rank order', JSON.stringify(lanes));
    check(lanes.every((l, i) => l.peak === sums[i].peakBytes), 'each lane\'s peak equals its file\'s summary',
      lanes.map(l => l.peak).join() + ' vs ' + sums.map(x => x.peakBytes).join());
    const top = sums.reduce((a, b, i) => (b.peakBytes > sums[a].peakBytes ? i : a), 0);
    check(Number(await rp.locator('[data-testid=spread-max]').getAttribute('data-bytes')) === sums[top].peakBytes,
      'the spread names the highest peak');
    // offsets on the shared axis against each rank's own absolute times
    const csvUs = files.map(firstAllocUs);
    const pageNs = await rp.evaluate(() => window.tidemarkView.ranks.lanes.map(l => {
      const s = window.tidemarkView.ranks.snapOf(l);
      let i = 0;
      while (i < s.na && s.aSeq[i] < 0) i++;
      return l.off + s.timeOf(s.aSeq[i]);
    }));
    const skew = [1, 2, 3].map(k => (pageNs[k] - pageNs[0]) / 1000 - (csvUs[k] - csvUs[0]));
    check(skew.every(d => Math.abs(d) <= 1.001), 'lanes sit at the ranks\' absolute times (to the µs)',
      skew.join(' '));
    const spanUs = Math.max(...csvUs) - Math.min(...csvUs);
    check(spanUs > 0, 'the ranks did not start at the same µs', spanUs);
    // the highest rank is shown first, at its peak
    let head = await rp.locator('[data-testid=detail-head]').textContent();
    let lv = await liveState(rp);
    check(head.startsWith('rank ' + top + ' in detail') && lv.bytes === sums[top].peakBytes,
      'opens with the highest rank at its peak', head + ' ' + lv.bytes);
    // the detail chart and the lanes draw a time at the same x
    const drift = await rp.evaluate(() => {
      const v = window.tidemarkView, r = v.ranks, p = v.panels[0], l = r.lanes[r.sel.k];
      const t = p.snap.timeOf(p.dev.peak_seq);
      const lx = l.canvas.getBoundingClientRect().left + r.xOf(l.off + t);
      const px = p.canvas.getBoundingClientRect().left + p.xOf(t);
      return lx - px;
    });
    check(Math.abs(drift) <= 1, 'the detail chart shares the lanes\' time axis', drift + ' px');
    // click rank 1 at its peak
    const laneBox = await rp.locator('[data-testid=lane]').nth(1).boundingBox();
    const px1 = await rp.evaluate(() => {
      const r = window.tidemarkView.ranks, l = r.lanes[1], s = r.snapOf(l);
      return r.xOf(l.off + s.timeOf(l.dev.peak_seq));
    });
    await rp.mouse.click(laneBox.x + px1, laneBox.y + laneBox.height / 2);
    head = await rp.locator('[data-testid=detail-head]').textContent();
    lv = await liveState(rp);
    check(head.startsWith('rank 1 in detail') && lv.bytes === sums[1].peakBytes,
      'clicking a lane at its peak shows that rank\'s peak below', head + ' ' + lv.bytes + ' vs ' + sums[1].peakBytes);
    await rp.screenshot({path: path.join(outDir, 'ranks.png'), fullPage: true});
    // zoom and pan the lanes: the detail panel follows on the same axis
    const spanOf = () => rp.evaluate(() => {
      const v = window.tidemarkView, r = v.ranks, p = v.panels[0];
      return {lanes: r.t1 - r.t0, panel: p.t1 - p.t0, t0: r.t0, p0: p.t0 + r.lanes[p.index].off};
    });
    const z0 = await spanOf();
    await rp.mouse.move(laneBox.x + laneBox.width / 2, laneBox.y + laneBox.height / 2);
    await rp.mouse.wheel(0, -400);
    await rp.waitForTimeout(50);
    const z1 = await spanOf();
    check(z1.lanes < z0.lanes * 0.75 && Math.abs(z1.panel - z1.lanes) < 1e-6 * z1.lanes &&
      Math.abs(z1.p0 - z1.t0) < 1, 'wheel over a lane zooms every lane and the detail', JSON.stringify([z0, z1]));
    await rp.mouse.move(laneBox.x + laneBox.width / 2, laneBox.y + 10);
    await rp.mouse.down();
    await rp.mouse.move(laneBox.x + laneBox.width / 2 - 150, laneBox.y + 10, {steps: 5});
    await rp.mouse.up();
    const z2 = await spanOf();
    check(z2.t0 > z1.t0 && Math.abs(z2.p0 - z2.t0) < 1, 'dragging a lane pans, the detail follows',
      JSON.stringify([z1, z2]));
    // zooming the detail chart moves the lanes
    const chart = await rp.locator('canvas.chart').boundingBox();
    await rp.mouse.move(chart.x + chart.width / 2, chart.y + chart.height / 2);
    await rp.mouse.wheel(0, 300);
    const z3 = await spanOf();
    check(z3.lanes > z2.lanes && Math.abs(z3.p0 - z3.t0) < 1, 'zooming the detail zooms the lanes',
      JSON.stringify([z2, z3]));
    // hover the middle of rank 1's own recorded window, with the whole job
    // in view again (after the zoom and pan above, that window may lie
    // partly or wholly outside the view)
    const hx = await rp.evaluate(() => {
      const r = window.tidemarkView.ranks, l = r.lanes[1], s = r.snapOf(l);
      r.resetZoom();
      const T = l.off + s.tEnd / 2;
      const left = r.scroll.getBoundingClientRect().left;
      return left + (r.tOfX(1000) === r.tOfX(0) ? 0 :
        (T - r.tOfX(0)) / ((r.tOfX(1000) - r.tOfX(0)) / 1000));
    });
    await rp.mouse.move(hx, laneBox.y + laneBox.height / 2);
    const rtip = await rp.locator('.lanes-box .tip').textContent();
    check(/^rank 1 on /.test(rtip) && /allocated/.test(rtip), 'hovering a lane names the rank and its bytes', rtip);
    await rp.locator('.lanes-scroll').focus();
    await rp.keyboard.press('ArrowDown');
    head = await rp.locator('[data-testid=detail-head]').textContent();
    check(head.startsWith('rank 2 in detail'), 'ArrowDown moves to the next rank', head);
    check(rk.errors.length === 0 && rk.requests.length === 0, 'ranks: no errors, no requests',
      rk.errors.concat(rk.requests).join('; '));

    // ---- many ranks: only the lanes in view are decoded and drawn
    const big = path.join(work, 'big');
    await recordJob(big, 24, r => ['--steps', '1', '--layers', '2', '--hidden', String(256 + 32 * r),
      '--compute-us', '0']);
    const bhtml = path.join(work, 'big.html');
    run(TIDEMARK, ['view', big, '-o', bhtml]);
    const bg = await openPage(browser, bhtml);
    // Lanes are decoded and drawn in animation frames: on a loaded machine
    // let the first frames settle before looking (the check below fails if
    // they never do).
    await bg.page.waitForFunction(() => {
      const r = window.tidemarkView.ranks;
      return r.lastDraw.lanes === r.lanes.filter(l => l.visible).length;
    }, null, {timeout: 10000}).catch(() => {});
    const st0 = await bg.page.evaluate(() => {
      const r = window.tidemarkView.ranks;
      return {n: r.lanes.length, decoded: r.decoded, drawn: r.lastDraw.lanes, visible: r.lanes.filter(l => l.visible).length};
    });
    check(st0.n === 24 && st0.decoded < 24 && st0.drawn === st0.visible && st0.drawn < 24,
      '24 ranks: only the lanes in view are decoded and drawn', JSON.stringify(st0));
    await bg.page.evaluate(() => { const s = document.querySelector('.lanes-scroll'); s.scrollTop = s.scrollHeight; });
    await bg.page.waitForFunction(() => window.tidemarkView.ranks.lanes[0].visible === false &&
      window.tidemarkView.ranks.lanes[23].snap !== null, null, {timeout: 5000}).catch(() => {});
    const st1 = await bg.page.evaluate(() => {
      const r = window.tidemarkView.ranks;
      return {last: r.lanes[23].snap !== null && r.lanes[23].visible, first: r.lanes[0].visible};
    });
    check(st1.last && !st1.first, 'scrolling the list draws the lanes that come into view', JSON.stringify(st1));
    const bbox = await bg.page.locator('[data-testid=lane]').nth(23).boundingBox();
    await bg.page.mouse.move(bbox.x + bbox.width / 2, bbox.y + bbox.height / 2);
    await bg.page.mouse.wheel(0, -300);
    await bg.page.waitForTimeout(50);
    const ms = await bg.page.evaluate(() => window.tidemarkView.ranks.lastDraw.ms);
    check(ms < 500, '24 ranks: a zoom redraws the lanes in view quickly', ms.toFixed(1) + ' ms');
    check(bg.errors.length === 0, '24 ranks: no errors', bg.errors.join('; '));
    await bg.page.screenshot({path: path.join(outDir, 'ranks24.png')});

    await pythonStacks(browser);
    await inlinedFrames(browser);
    await timeAxes(browser, a);
  } finally {
    await browser.close();
  }
}

main().then(() => {
  fs.rmSync(work, {recursive: true, force: true});
  console.log(failures ? failures + ' of ' + checks + ' checks failed' : 'all ' + checks + ' checks passed');
  process.exit(failures ? 1 : 0);
}, e => {
  console.log('not ok - ' + (e && e.stack || e));
  process.exit(1);
});
