// scalerl ui: the live view's pages. Every element is built with textContent (never innerHTML),
// so a name from the store is text whatever it holds; strings handed to Plotly (which reads a
// small HTML subset in names and titles) go through pesc(). Updates come by polling the JSON
// endpoints with the last `seq` seen, so each poll carries only what changed.
'use strict';
(function () {
  const main = document.getElementById('main');
  const liveEl = document.getElementById('live');
  const params = new URLSearchParams(location.search);
  const state = { refreshMs: 2000, updates: 0, polls: 0, failures: 0 };
  window.__scalerl = state;  // read by the browser tests (how many updates were applied)

  // ------------------------------------------------------------------ helpers
  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = String(v);
      else if (k === 'title') e.title = String(v);
      else if (k === 'href') e.setAttribute('href', v);
      else if (k.startsWith('data-')) e.setAttribute(k, String(v));
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      else e[k] = v;
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function pesc(s) {  // for Plotly's pseudo-HTML: entities decode back to the literal text
    return String(s === null || s === undefined ? '' : s)
      .replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      .replace(/"/g, '&#34;').replace(/'/g, '&#x27;');
  }
  function fmt(v, d) {
    d = d === undefined ? 3 : d;
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    if (typeof v !== 'number') return String(v);
    if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(Math.max(d - 1, 1));
    return v.toFixed(d);
  }
  function interval(lo, hi) {
    return (lo === null || lo === undefined || hi === null || hi === undefined) ? '–' : '[' + fmt(lo) + ', ' + fmt(hi) + ']';
  }
  function when(iso) { return iso ? iso.slice(0, 19).replace('T', ' ') : '–'; }
  function link(path, query, text) {
    return el('a', { href: path + '?' + new URLSearchParams(query).toString(), text: text });
  }
  async function getJSON(url) {
    const r = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
    if (!r.ok) {
      let msg = r.status + ' ' + r.statusText;
      try { msg = (await r.json()).error || msg; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    return r.json();
  }
  let plotlyReady = null;
  function loadPlotly() {  // plotly.js only for pages that draw
    if (!plotlyReady) {
      plotlyReady = new Promise((resolve, reject) => {
        const s = document.createElement('script');
        s.src = '/static/plotly.min.js';
        s.onload = () => resolve(window.Plotly);
        s.onerror = () => reject(new Error('plotly.js did not load'));
        document.head.append(s);
      });
    }
    return plotlyReady;
  }
  const PLOT_CONFIG = { displaylogo: false, responsive: true };
  function setLive(ok, text) {
    liveEl.textContent = text;
    liveEl.classList.toggle('stale', !ok);
  }
  function poll(fn) {
    async function tick() {
      state.polls += 1;
      try {
        await fn();
        state.failures = 0;
        setLive(true, 'live · updated ' + new Date().toLocaleTimeString());
      } catch (err) {
        state.failures += 1;
        setLive(false, 'not updating: ' + err.message);
      }
      setTimeout(tick, state.refreshMs * Math.min(1 + state.failures, 5));
    }
    setTimeout(tick, state.refreshMs);
  }
  const VERDICT_COLORS = {
    'asymptote-mover': '#d62728', 'efficiency-shaper': '#1f77b4', 'no-effect': '#7f7f7f',
    'undecided': '#9467bd', 'unstable': '#ff7f0e', 'unfit': '#bcbd22',
  };
  const PALETTE = ['#636efa', '#ef553b', '#00cc96', '#ab63fa', '#ffa15a', '#19d3f3', '#ff6692', '#b6e880',
    '#ff97ff', '#fecb52', '#2e91e5', '#e15f99', '#1ca71c', '#fb0d0d', '#da16ff', '#222a2a', '#b68100',
    '#750d86', '#eb663b', '#511cfb'];
  function variantColors(names) {  // as the report: the baseline first, the rest sorted
    const sorted = Array.from(new Set(names)).sort((a, b) =>
      (a !== 'baseline') - (b !== 'baseline') || (a < b ? -1 : a > b ? 1 : 0));
    const out = {};
    sorted.forEach((n, i) => { out[n] = PALETTE[i % PALETTE.length]; });
    return out;
  }

  // ------------------------------------------------------------------ the sweeps
  async function sweepsPage() {
    document.title = 'scalerl ui: sweeps';
    const groups = ['completed', 'running', 'waiting', 'failed', 'stopped'];
    const body = el('tbody');
    const head = el('tr', null, ...['sweep', 'source', 'design', 'runs', ...groups, 'created', 'last moved']
      .map((h, i) => el('th', { text: h, class: i >= 3 && i < 9 ? 'num' : null })));
    const empty = el('p', { class: 'meta' });
    main.replaceChildren(el('h1', { text: 'Sweeps' }), empty,
      el('table', { class: 'sweeps' }, el('thead', null, head), body));
    async function draw() {
      const got = await getJSON('/api/sweeps');
      empty.textContent = got.sweeps.length ? '' : 'No sweeps in this store yet.';
      body.replaceChildren(...got.sweeps.map((s) => el('tr', { 'data-sweep': s.name },
        el('td', null, link('/sweep', { name: s.name }, s.name)), el('td', { text: s.source }),
        el('td', { text: s.design || '–' }), el('td', { class: 'num', text: s.runs }),
        ...groups.map((g) => el('td', { class: 'num ' + g, text: s[g] })),
        el('td', { text: when(s.created_at) }), el('td', { text: when(s.last_event) }))));
    }
    await draw();
    setLive(true, 'live');
    poll(draw);
  }

  // ------------------------------------------------------------------ a sweep
  const KNOWN_VERDICT_COLUMNS = new Set(['knob', 'variant', 'alternative', 'metric', 'axis', 'verdict', 'a_base',
    'a_variant', 'd_a', 'd_a_lo', 'd_a_hi', 'b_base', 'b_variant', 'd_b', 'd_b_lo', 'd_b_hi', 'margin', 'reason',
    'mde_a', 'mde_b']);
  function probabilityColumns(rows) {  // a verdict result that carries probabilities: shown as it names them
    const cols = new Set();
    for (const r of rows) for (const k of Object.keys(r)) {
      if (!KNOWN_VERDICT_COLUMNS.has(k) && (/^p_/.test(k) || /prob/i.test(k))) cols.add(k);
    }
    return Array.from(cols).sort();
  }

  async function sweepPage(name) {
    document.title = 'scalerl ui: ' + name;
    const query = { name: name };
    if (params.get('metric')) query.metric = params.get('metric');
    if (params.get('axis')) query.axis = params.get('axis');
    const q = new URLSearchParams(query).toString();
    performance.mark('sweep-start');
    const [first, Plotly] = await Promise.all([getJSON('/api/sweep?' + q + '&since=0'), loadPlotly()]);
    performance.measure('fetch+plotly.js', 'sweep-start');
    const s = {
      seq: first.seq, runs: new Map(), curves: new Map(), fit: first.fit, focus: 'all',
      metric: first.metric, axis: first.axis,
    };

    const title = el('h1', { text: name });
    const meta = el('p', { class: 'meta' });
    const fitLine = el('p', { class: 'meta fit-status' });
    const notes = el('div');
    const verdictBox = el('div', { class: 'verdict-box' });
    const knobDiv = el('div', { class: 'plot', id: 'knob-map' });
    const focusSel = el('select', { id: 'focus', 'aria-label': 'variants drawn' });
    const curvesDiv = el('div', { class: 'plot', id: 'curves' });
    const runsBody = el('tbody');
    const runHead = ['run', 'variant', 'seed', 'status', 'attempts', 'points', 'last value', 'compute', 'code',
      'source', 'error'];
    main.replaceChildren(
      title, meta, fitLine, notes,
      el('h2', { text: 'Verdicts' }), verdictBox,
      el('h2', { text: 'Knob map' }), knobDiv,
      el('h2', { text: 'Curves' }),
      el('div', { class: 'controls' }, el('label', { text: 'variants: ' }, focusSel),
        el('span', { class: 'meta', text: 'points: every seed (drawn downsampled; fits use every point). ' +
          'Solid: fit over its window; dashed and shaded: the forecast with its 90% interval.' })),
      curvesDiv,
      el('h2', { text: 'Runs' }),
      el('div', { class: 'scroll' }, el('table', { class: 'runs' },
        el('thead', null, el('tr', null, ...runHead.map((h) => el('th', { text: h })))), runsBody)));

    function drawMeta(counts, points, sampled) {
      const parts = Object.entries(counts).sort().map(([k, v]) => v + ' ' + k).join(', ');
      meta.textContent = 'metric ' + s.metric + ' against ' + s.axis + ' · ' + s.runs.size + ' runs: ' +
        (parts || 'none') + ' · ' + points.toLocaleString() + ' points' + (sampled
          ? ' · curves drawn from a sample of each run (first, last, lowest, highest and evenly spaced points); ' +
            'every point is being read' : '');
      meta.dataset.sampled = sampled ? '1' : '0';
    }
    function drawFitLine() {
      const f = s.fit;
      const bits = [];
      if (f.source === 'live') bits.push('fitted by the view on ' + f.points.toLocaleString() + ' points at ' +
        when(f.fitted_at) + ' in ' + fmt(f.seconds, 1) + ' s (not stored)');
      else if (f.source === 'stored') bits.push('fits and verdicts stored by `scalerl fit`');
      else bits.push('no fit yet');
      if (f.running) bits.push('refitting since ' + when(f.running_since) + '…');
      else if (f.stale) bits.push('new points since this fit');
      fitLine.textContent = bits.join(' · ');
      notes.replaceChildren(
        ...(f.error ? [el('p', { class: 'notice fit-error', text: 'the latest fit failed: ' + f.error })] : []),
        ...(f.notes || []).map((n) => el('p', { class: 'meta', text: n })));
    }
    function drawVerdicts() {
      const rows = s.fit.verdicts || [];
      if (!rows.length) {
        verdictBox.replaceChildren(el('p', { class: 'meta no-verdicts', text: s.fit.running
          ? 'No verdicts yet: fitting…' : 'No verdicts yet (a verdict needs a baseline and a variant with fitted points).' }));
        return;
      }
      const probs = probabilityColumns(rows);
      const heads = ['knob', 'variant', 'alternative', 'verdict', 'ΔA', 'ΔA interval', 'ΔB', 'ΔB interval',
        ...probs, 'margin', 'MDE ΔA', 'reason'];
      const body = el('tbody');
      for (const r of rows) {
        const color = VERDICT_COLORS[r.verdict] || '#8c564b';
        const tr = el('tr', { 'data-variant': r.variant, 'data-verdict': r.verdict,
          on: { click: () => { setFocus(r.variant); } } },
        el('td', { text: r.knob || '–' }), el('td', { text: r.variant }), el('td', { text: r.alternative || '–' }),
        el('td', null, el('span', { class: 'verdict-chip', text: r.verdict })),
        el('td', { class: 'num', text: fmt(r.d_a) }), el('td', { class: 'num', text: interval(r.d_a_lo, r.d_a_hi) }),
        el('td', { class: 'num', text: fmt(r.d_b) }), el('td', { class: 'num', text: interval(r.d_b_lo, r.d_b_hi) }),
        ...probs.map((p) => el('td', { class: 'num', text: fmt(r[p]) })),
        el('td', { class: 'num', text: fmt(r.margin) }), el('td', { class: 'num', text: fmt(r.mde_a) }),
        el('td', { class: 'reason', text: r.reason || '' }));
        tr.querySelector('.verdict-chip').style.background = color;
        if (r.variant === s.focus) tr.classList.add('focus');
        body.append(tr);
      }
      verdictBox.replaceChildren(el('table', { class: 'verdicts' },
        el('thead', null, el('tr', null, ...heads.map((h) => el('th', { text: h })))), body));
    }
    function drawKnobMap() {
      const fig = s.fit.knob_map;
      if (!fig) {
        Plotly.purge(knobDiv);
        knobDiv.replaceChildren(el('p', { class: 'meta', text: 'No knob to place yet.' }));
        return;
      }
      if (!knobDiv.classList.contains('js-plotly-plot')) knobDiv.replaceChildren();
      Plotly.react(knobDiv, fig.data, fig.layout, PLOT_CONFIG);
    }
    function runRow(r) {
      const tr = el('tr', { 'data-run': r.run_id, 'data-status': r.status },
        el('td', null, link('/run', { id: r.run_id }, r.run_id)), el('td', { text: r.variant }),
        el('td', { class: 'num', text: r.seed }), el('td', { class: 'status status-' + r.status, text: r.status }),
        el('td', { class: 'num', text: r.attempts }), el('td', { class: 'num points', text: r.points }),
        el('td', { class: 'num value', text: fmt(r.value, 4) }), el('td', { class: 'num', text: fmt(r.compute) }),
        el('td', { text: r.code }),
        el('td', { text: r.source + (r.source_status ? ' (' + r.source_status + ' at its source)' : '') }),
        el('td', { class: 'reason', text: r.error || '' }));
      return tr;
    }
    const rowEls = new Map();
    function applyRuns(rows) {
      for (const r of rows) {
        s.runs.set(r.run_id, r);
        const tr = runRow(r);
        const old = rowEls.get(r.run_id);
        if (old) old.replaceWith(tr); else runsBody.append(tr);
        rowEls.set(r.run_id, tr);
      }
    }
    function applyCurves(curves) {
      for (const c of curves) {
        const have = s.curves.get(c.run_id);
        if (c.reset || !have) s.curves.set(c.run_id, { x: c.x.slice(), y: c.y.slice() });
        else { have.x.push(...c.x); have.y.push(...c.y); }
      }
    }
    function setFocus(v) {
      s.focus = v;
      focusSel.value = v;
      verdictBox.querySelectorAll('tr[data-variant]').forEach((tr) =>
        tr.classList.toggle('focus', tr.dataset.variant === v));
      drawCurves();
    }
    focusSel.addEventListener('change', () => setFocus(focusSel.value));
    function drawFocusOptions() {
      const variants = Array.from(new Set(Array.from(s.runs.values()).map((r) => r.variant))).sort();
      const want = ['all', ...variants.filter((v) => v !== 'baseline')];
      if (focusSel.options.length === want.length) return;
      focusSel.replaceChildren(...want.map((v) => el('option', { value: v,
        text: v === 'all' ? 'every variant' : 'baseline and ' + v })));
      focusSel.value = s.focus;
    }
    let redrawPending = false;
    function drawCurves() {
      redrawPending = false;
      const byVariant = new Map();
      for (const [rid, c] of s.curves) {
        const r = s.runs.get(rid);
        if (!r) continue;
        if (s.focus !== 'all' && r.variant !== s.focus && r.variant !== 'baseline') continue;
        if (!byVariant.has(r.variant)) byVariant.set(r.variant, { x: [], y: [], n: 0 });
        const t = byVariant.get(r.variant);
        if (t.n) { t.x.push(null); t.y.push(null); }
        for (let i = 0; i < c.x.length; i++) { t.x.push(c.x[i]); t.y.push(c.y[i]); }
        t.n += 1;
      }
      const colors = variantColors(Array.from(s.runs.values()).map((r) => r.variant));
      const traces = [];
      // A marker per point is an SVG element each: past a few thousand points, lines only.
      let total = 0;
      for (const t of byVariant.values()) total += t.x.length;
      const markers = total <= 3000;
      for (const [v, t] of Array.from(byVariant).sort()) {
        traces.push({ type: 'scatter', mode: markers ? 'lines+markers' : 'lines', x: t.x, y: t.y,
          name: pesc(v) + ' · ' + t.n + ' run' + (t.n === 1 ? '' : 's'), legendgroup: pesc(v),
          line: { color: colors[v], width: 1 }, marker: { size: 3 }, opacity: 0.7, connectgaps: false,
          hovertemplate: pesc(v) + '<br>C=%{x:.4g}<br>value=%{y:.4f}<extra></extra>' });
      }
      for (const b of s.fit.bands || []) {
        const group = b.legendgroup;
        const shown = s.focus === 'all' || group === pesc(s.focus) || group === 'baseline';
        if (shown) traces.push(b);
      }
      const layout = {
        template: 'plotly_white', height: 560, margin: { t: 30 }, hovermode: 'closest',
        xaxis: { title: { text: pesc(s.axis) }, type: s.axis === 'step' ? 'linear' : 'log' },
        yaxis: { title: { text: pesc(s.metric) } }, legend: { groupclick: 'togglegroup' },
        showlegend: byVariant.size <= 24,  // past that a legend is a wall: pick variants above
        uirevision: s.focus,
      };
      Plotly.react(curvesDiv, traces, layout, PLOT_CONFIG);
    }
    function scheduleCurves() {
      if (!redrawPending) { redrawPending = true; requestAnimationFrame(drawCurves); }
    }
    function applyFit(fit) {
      if (!fit) return;
      const verdictsChanged = JSON.stringify(fit.verdicts) !== JSON.stringify(s.fit.verdicts);
      const bandsChanged = fit.bands !== s.fit.bands;
      s.fit = fit;
      drawFitLine();
      if (verdictsChanged || !verdictBox.firstChild) { drawVerdicts(); drawKnobMap(); }
      if (bandsChanged) scheduleCurves();
    }

    const timed = (name, fn) => { const t = performance.now(); fn(); performance.measure(name, { start: t }); };
    timed('runs table', () => applyRuns(first.runs));
    applyCurves(first.curves);
    drawMeta(first.counts, first.points, first.sampled);
    for (const n of first.notes) notes.append(el('p', { class: 'meta', text: n }));
    drawFitLine();
    timed('verdicts', drawVerdicts);
    drawFocusOptions();
    timed('curves', drawCurves);
    timed('knob map', drawKnobMap);
    performance.measure('sweep page', 'sweep-start');
    document.body.dataset.ready = '1';
    setLive(true, 'live');
    poll(async () => {
      const got = await getJSON('/api/sweep?' + q + '&since=' + s.seq);
      s.seq = got.seq;
      if (got.runs.length || got.curves.length || got.fit) state.updates += 1;
      applyRuns(got.runs);
      if (got.curves.length) { applyCurves(got.curves); scheduleCurves(); }
      if (got.runs.length) drawFocusOptions();
      drawMeta(got.counts, got.points, got.sampled);
      applyFit(got.fit);
    });
  }

  // ------------------------------------------------------------------ a run
  async function runPage(id) {
    document.title = 'scalerl ui: run ' + id;
    const q = { id: id };
    if (params.get('metric')) q.metric = params.get('metric');
    const base = '/api/run?' + new URLSearchParams(q).toString();
    const first = await getJSON(base + '&after=-1');
    const Plotly = await loadPlotly();
    const r = { last: first.last_step, step: first.draw.step.slice(), value: first.draw.value.slice(),
      table: first.table.slice(), logSize: first.log_size };
    const meta = el('p', { class: 'meta' });
    const errorBox = el('div');
    const metricSel = el('select', { 'aria-label': 'metric' },
      ...first.metrics.map((m) => el('option', { value: m, text: m })));
    metricSel.value = first.metric;
    metricSel.addEventListener('change', () => {
      const u = new URLSearchParams({ id: id, metric: metricSel.value });
      location.assign('/run?' + u.toString());
    });
    const curveDiv = el('div', { class: 'plot', id: 'run-curve' });
    const pointsBody = el('tbody');
    const logBox = el('div');
    const provBox = el('pre', { class: 'provenance' });
    const configBox = el('pre', { class: 'config' });
    const sweeps = el('span', null, ...first.sweeps.flatMap((sw, i) =>
      [i ? ', ' : '', link('/sweep', { name: sw }, sw)]));
    main.replaceChildren(
      el('h1', { text: 'run ' + id }), el('p', { class: 'meta' }, 'sweep: ', sweeps), meta, errorBox,
      el('h2', { text: 'Curve' }), el('div', { class: 'controls' }, el('label', { text: 'metric: ' }, metricSel)),
      curveDiv,
      el('div', { class: 'grid2' },
        el('div', null, el('h2', { text: 'Points (newest first)' }), el('div', { class: 'scroll' },
          el('table', { class: 'points' }, el('thead', null, el('tr', null,
            ...first.columns.map((c) => el('th', { text: c })))), pointsBody))),
        el('div', null, el('h2', { text: 'Log (tail)' }), logBox)),
      el('div', { class: 'grid2' },
        el('div', null, el('h2', { text: 'Provenance (code)' }), provBox),
        el('div', null, el('h2', { text: 'Config' }), configBox)));
    function drawMeta(d) {
      meta.textContent = ['variant ' + d.variant, 'seed ' + d.seed, 'status ' + d.status,
        'attempt ' + d.attempts, (d.executor || '–') + (d.job_id ? ' job ' + d.job_id : ''),
        'host ' + (d.host || '–'), 'code ' + d.code, 'started ' + when(d.started_at),
        'ended ' + when(d.ended_at)].join(' · ');
      document.body.dataset.status = d.status;
      errorBox.replaceChildren(...(d.error ? [el('p', { class: 'error', text: d.error })] : []));
      provBox.textContent = JSON.stringify(d.provenance, null, 2);
      configBox.textContent = JSON.stringify(d.config, null, 2);
    }
    function drawPoints() {
      pointsBody.replaceChildren(...r.table.slice().reverse().slice(0, 500).map((row) =>
        el('tr', null, ...row.map((v, i) => el('td', { class: i ? 'num' : 'num step', text: typeof v === 'number' && i ? fmt(v, 4) : (v === null ? '–' : v) })))));
    }
    function drawLog(d) {
      if (d.log === undefined) return;  // unchanged
      if (!d.log) { logBox.replaceChildren(el('p', { class: 'meta', text: d.log_note || 'no log' })); return; }
      logBox.replaceChildren(...d.log.map((f) => el('div', null, el('p', { class: 'meta', text: f.file }),
        el('pre', { class: 'log', text: f.text }))));
    }
    function drawCurve() {
      Plotly.react(curveDiv, [{ type: 'scatter', mode: r.step.length <= 2000 ? 'lines+markers' : 'lines',
        x: r.step, y: r.value, name: pesc(first.metric), marker: { size: 4 } }],
      { template: 'plotly_white', height: 420, margin: { t: 20 }, xaxis: { title: { text: 'step' } },
        yaxis: { title: { text: pesc(first.metric) } }, uirevision: 'run' }, PLOT_CONFIG);
    }
    drawMeta(first); drawPoints(); drawLog(first); drawCurve();
    document.body.dataset.ready = '1';
    setLive(true, 'live');
    const pollBase = '/api/run?' + new URLSearchParams({ id: id, metric: first.metric }).toString();
    poll(async () => {
      const d = await getJSON(pollBase + '&after=' + r.last + '&log_size=' + r.logSize);
      drawMeta(d);
      drawLog(d);
      r.logSize = d.log_size;
      if (d.table.length) {
        state.updates += 1;
        r.last = d.last_step;
        r.step.push(...d.draw.step); r.value.push(...d.draw.value);
        r.table.push(...d.table);
        if (r.table.length > 500) r.table = r.table.slice(-500);
        drawPoints(); drawCurve();
      }
    });
  }

  // ------------------------------------------------------------------ routing
  async function start() {
    try {
      const info = await getJSON('/api/info');
      state.refreshMs = Math.max(200, 1000 * info.refresh_s);
      document.getElementById('store').textContent = 'store: ' + info.store;
      if (location.pathname === '/sweep') await sweepPage(params.get('name') || '');
      else if (location.pathname === '/run') await runPage(params.get('id') || '');
      else await sweepsPage();
    } catch (err) {
      main.replaceChildren(el('p', { class: 'error', text: String(err.message || err) }),
        el('p', null, el('a', { href: '/', text: 'all sweeps' })));
      setLive(false, 'stopped');
    }
  }
  start();
})();
