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
 * side.  Screenshots go to $TDM_BROWSER_OUT (default: the working folder).
 *
 * Environment: TIDEMARK, TRAIN_SIM (programs), CHROMIUM (browser path).
 * Exit 0 pass, 1 fail, 77 skipped (playwright-core or chromium missing).
 */
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const {execFileSync} = require('child_process');

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
  if (ok) console.log('ok ' + checks + ' - ' + what);
  else { failures++; console.log('not ok ' + checks + ' - ' + what + (detail !== undefined ? ': ' + detail : '')); }
}

function run(prog, args, env) {
  return execFileSync(prog, args, {env: {...process.env, TIDEMARK_CONF: '', ...env}, encoding: 'utf8'});
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

async function main() {
  const a = path.join(work, 'train.tdm'), b = path.join(work, 'small.tdm');
  run(TRAIN_SIM, ['--steps', '5'], {TIDEMARK_CONF: 'dump=' + a});
  run(TRAIN_SIM, ['--steps', '3', '--layers', '4', '--hidden', '1024'], {TIDEMARK_CONF: 'dump=' + b});
  const sa = summaryOf(a), sb = summaryOf(b);
  const html = path.join(work, 'view.html');
  const said = run(TIDEMARK, ['view', a, '-o', html]);
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
    check(two.errors.length === 0 && two.requests.length === 0, 'side by side: no errors, no requests',
      two.errors.concat(two.requests).join('; '));
    await two.page.screenshot({path: path.join(outDir, 'compare.png'), fullPage: true});
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
