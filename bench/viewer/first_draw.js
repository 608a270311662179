#!/usr/bin/env node
/* bench/viewer/first_draw.js: how fast `tidemark view` and its page are on
 * a 1M-event snapshot.
 *
 *   node bench/viewer/first_draw.js [BUILD_DIR] [--events N] [--runs R]
 *
 * Records examples/train_sim on the sim device with a ring of N events
 * (default 1,000,000; the run is long enough to fill it), once with the
 * caching allocator and once pass-through (two more events per
 * allocation), writes the page with `tidemark view`, opens it R times
 * (default 3) in headless Chromium and prints a table of medians:
 * page and data size, bytes per event, the tool's time, time to first
 * draw (navigation start to the chart drawn: the page's "tdm-first-draw"
 * mark), decoding, the views below the chart, a zoom redraw, a hover
 * repaint and a click (select a time: live list, flame graph, map,
 * sites).  Target: first draw under 2 s.
 *
 * Needs what the browser test needs: chromium, node, and
 * `npm ci --prefix tests/browser` (playwright-core).
 */
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const {execFileSync} = require('child_process');

const root = path.resolve(__dirname, '..', '..');
const args = process.argv.slice(2);
let build = path.join(root, 'build'), events = 1000000, runs = 3;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--events') events = Number(args[++i]);
  else if (args[i] === '--runs') runs = Number(args[++i]);
  else build = path.resolve(args[i]);
}
const TIDEMARK = path.join(build, 'tidemark'), TRAIN_SIM = path.join(build, 'examples', 'train_sim');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
let chromium;
try {
  ({chromium} = require(path.join(root, 'tests', 'browser', 'node_modules', 'playwright-core')));
} catch (e) {
  console.error('first_draw: playwright-core missing: npm ci --prefix tests/browser');
  process.exit(2);
}
for (const f of [TIDEMARK, TRAIN_SIM, CHROMIUM])
  if (!fs.existsSync(f)) { console.error('first_draw: missing ' + f); process.exit(2); }

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tdm-bench-viewer-'));
const median = a => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];

function record(mode) {
  const file = path.join(work, mode + '.tdm');
  // ~140 events a step with 6 layers: run past the ring so it is full.
  const steps = String(Math.ceil(events / 130) + 10);
  execFileSync(TRAIN_SIM, ['--steps', steps, '--hidden', '64', '--batch', '64'], {
    env: {...process.env, TIDEMARK_CONF: 'dump=' + file + ',max_entries=' + events + ',alloc_mode=' + mode},
    stdio: 'ignore'});
  return file;
}

async function measure(browser, html) {
  const page = await browser.newPage({viewport: {width: 1600, height: 1000}});
  const errors = [];
  page.on('pageerror', e => errors.push(e.message));
  await page.goto('file://' + html);
  await page.waitForSelector('body[data-ready="1"]', {timeout: 120000});
  const r = await page.evaluate(() => {
    const v = window.tidemarkView, p = v.panels[0];
    const mark = performance.getEntriesByName('tdm-first-draw')[0];
    const time = (fn, n) => { const t = performance.now(); for (let i = 0; i < n; i++) fn(i); return (performance.now() - t) / n; };
    const zoom = time(i => { p.zoom(i % 2 ? 2 : 0.5, 0.4); }, 10);
    const hover = time(() => { p.hoverX = 300; p.paint(); }, 10);
    const seq = Math.floor(p.snap.n / 2);
    const click = time(i => p.select(seq + i), 3);
    return {first: mark.startTime, decode: v.timings.decode_ms, details: v.timings.details_ms, zoom, hover, click,
      events: p.snap.n, allocs: p.snap.na};
  });
  await page.close();
  if (errors.length) throw new Error('page errors: ' + errors.join('; '));
  return r;
}

async function main() {
  const browser = await chromium.launch({executablePath: CHROMIUM,
    args: process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []});
  const rows = [];
  try {
    for (const mode of ['cache', 'passthrough']) {
      const tdm = record(mode), html = path.join(work, mode + '.html');
      const t = process.hrtime.bigint();
      execFileSync(TIDEMARK, ['view', tdm, '-o', html], {env: {...process.env, TIDEMARK_CONF: ''}, stdio: 'pipe'});
      const toolMs = Number(process.hrtime.bigint() - t) / 1e6;
      const text = fs.readFileSync(html, 'utf8');
      const start = text.indexOf('id="tdm-data">') + 14, end = text.indexOf('</script>', start);
      const res = [];
      for (let i = 0; i < runs; i++) res.push(await measure(browser, html));
      const m = k => median(res.map(x => x[k]));
      rows.push({mode, events: res[0].events, allocs: res[0].allocs, tdm: fs.statSync(tdm).size,
        page: fs.statSync(html).size, data: end - start, toolMs,
        first: m('first'), decode: m('decode'), details: m('details'), zoom: m('zoom'), hover: m('hover'),
        click: m('click')});
    }
  } finally {
    await browser.close();
    fs.rmSync(work, {recursive: true, force: true});
  }
  const MB = n => (n / 1048576).toFixed(1) + ' MiB';
  const ms = n => n.toFixed(n < 10 ? 1 : 0) + ' ms';
  const cols = [
    ['allocator', r => r.mode], ['events', r => String(r.events)], ['allocations', r => String(r.allocs)],
    ['.tdm', r => MB(r.tdm)], ['page', r => MB(r.page)], ['B/event', r => (r.data / r.events).toFixed(1)],
    ['tidemark view', r => ms(r.toolMs)], ['first draw', r => ms(r.first)], ['decode', r => ms(r.decode)],
    ['details', r => ms(r.details)], ['zoom redraw', r => ms(r.zoom)], ['hover', r => ms(r.hover)],
    ['click', r => ms(r.click)],
  ];
  const cells = [cols.map(c => c[0]), ...rows.map(r => cols.map(c => c[1](r)))];
  const widths = cols.map((c, i) => Math.max(...cells.map(row => row[i].length)));
  console.log('tidemark view on a ' + events + '-event ring (train_sim, sim device), Chromium ' +
    'headless, median of ' + runs + ' loads; first draw = navigation start to the chart drawn');
  cells.forEach((row, k) => {
    console.log(row.map((v, i) => (i ? v.padStart(widths[i]) : v.padEnd(widths[i]))).join('  '));
    if (k === 0) console.log(widths.map(w => '-'.repeat(w)).join('  '));
  });
  const worst = Math.max(...rows.map(r => r.first));
  console.log('first draw ' + (worst < 2000 ? 'meets' : 'MISSES') + ' the 2 s target (worst ' + ms(worst) + ')');
}

main().catch(e => { console.error(e); process.exit(1); });
