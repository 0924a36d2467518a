// The coverage map's model and drawing (served by src/http/ui.rs; app.js is the rest).
// Turns are laid out on a line by tokens; the overview gives each pixel column one colour, the
// lens draws the turns around the selection one by one. Canvases, not a node per turn, so that
// 10,000 turns draw at once.
"use strict";

const LIVE = 0, SUMMARY = 1, RAW = 2, PINNED = 3;
const NAMES = ["live", "summary", "raw_log", "pinned"];
const COLORS = ["#9aa5b1", "#2e9d5b", "#d9822b", "#7b52c7"]; // as in app.css
// When turns share a pixel column, the one a person is looking for gives it its colour (and
// is what a click there opens): an uncovered turn first, then a pinned one.
const PRIORITY = [0, 1, 3, 2];
const BAND_H = 16, STRIP_H = 44, LENS_TURNS = 60;

// ---- the model: the checkpoints' verdicts and the turns' sizes, a page at a time ----------
async function load(root) {
  let requests = 1;
  const conv = await api(root);
  const checkpoints = [];
  for (let cursor = null, first = true; first || cursor != null; first = false, requests++) {
    const page = await api(`${root}/compactions?limit=1000${cursor != null ? "&cursor=" + cursor : ""}`);
    checkpoints.push(...page.checkpoints);
    cursor = page.next_cursor;
  }
  checkpoints.reverse(); // oldest first: a newer checkpoint decides the turns both span
  const turns = [];
  for (let from = 0; from != null && from < conv.next_id; requests++) {
    const page = await api(`${root}/turns?from=${from}&limit=10000`);
    turns.push(...page.turns);
    from = page.next_from;
  }
  const m = model(conv, checkpoints, turns);
  // Reasons and missing anchors: one call per checkpoint that decides a turn.
  const deciding = checkpoints.filter((c) => m.decides.has(c.checkpoint_id));
  for (let i = 0; i < deciding.length; i += 4) {
    const batch = deciding.slice(i, i + 4).map((c) => api(`${root}/compactions/${c.checkpoint_id}`));
    for (const detail of await Promise.all(batch)) m.details.set(detail.checkpoint_id, detail);
  }
  m.requests = requests + deciding.length;
  reasons(m);
  return m;
}

function model(conv, checkpoints, turns) {
  // Turns appended after the conversation was read are left for the next load.
  const n = Math.min(conv.next_id, turns.length);
  const m = {
    n, checkpoints, totalTokens: 0, details: new Map(), decides: new Set(), selected: null,
    status: new Uint8Array(n), deciding: new Float64Array(n), reason: new Array(n).fill(null),
    tokens: new Float64Array(n), pinned: new Uint8Array(n),
  };
  for (let t = 0; t < n; t++) {
    m.tokens[t] = turns[t].tokens;
    m.pinned[t] = turns[t].pinned ? 1 : 0;
    m.totalTokens += turns[t].tokens;
  }
  const covered = new Float64Array(n);
  for (const c of checkpoints) {
    for (let t = c.from; t <= Math.min(c.advanced_to, n - 1); t++) m.deciding[t] = c.checkpoint_id;
    for (const [a, b] of c.covered) for (let t = a; t <= Math.min(b, n - 1); t++) covered[t] = c.checkpoint_id;
  }
  for (let t = 0; t < n; t++) {
    const k = m.deciding[t];
    // A pinned turn no checkpoint spans is pinned, not merely live: no summary will cover it.
    m.status[t] = k === 0 ? (m.pinned[t] ? PINNED : LIVE) : covered[t] === k ? SUMMARY : RAW;
    if (k) m.decides.add(k);
  }
  m.start = new Float64Array(n + 1);
  // Every turn at least one token wide, so that each can be reached.
  for (let t = 0; t < n; t++) m.start[t + 1] = m.start[t] + Math.max(1, m.tokens[t]);
  m.total = m.start[n];
  return m;
}

function reasons(m) {
  for (const [k, detail] of m.details) {
    for (const turn of detail.turns) {
      if (m.deciding[turn.id] !== k) continue;
      m.reason[turn.id] = turn.reason;
      if (turn.reason === "pinned") m.status[turn.id] = PINNED;
    }
  }
}

// ---- drawing ------------------------------------------------------------------------------
// Lanes for the bands: a checkpoint goes in the first lane free at its `from`.
function lanes(checkpoints) {
  const ends = [];
  return checkpoints.map((c) => {
    let lane = ends.findIndex((end) => end < c.from);
    if (lane < 0) lane = ends.push(0) - 1;
    ends[lane] = c.advanced_to;
    return lane;
  });
}

function prepare(canvas, height) {
  const dpr = window.devicePixelRatio || 1, width = canvas.clientWidth;
  canvas.style.height = height + "px";
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, width, height);
  g.font = "11px system-ui, sans-serif";
  g.textBaseline = "middle";
  return { g, width };
}

// A view maps turns [a, b] onto the canvas's width, in proportion to their tokens.
function view(m, canvas, a, b) {
  const x0 = m.start[a], span = m.start[b + 1] - x0, width = canvas.clientWidth;
  return { a, b, width, x: (t) => ((m.start[t] - x0) / span) * width };
}

function drawBands(m, g, v) {
  m.checkpoints.forEach((c, i) => {
    if (c.advanced_to < v.a || c.from > v.b) return;
    const from = Math.max(c.from, v.a), to = Math.min(c.advanced_to, v.b, m.n - 1);
    const x = v.x(from), w = Math.max(2, v.x(to + 1) - x), y = m.lanes[i] * BAND_H + 2;
    g.fillStyle = m.decides.has(c.checkpoint_id) ? "#3b4a5a" : "#b8c2cc";
    g.fillRect(x, y, w - 1, BAND_H - 4);
    const label = `#${c.checkpoint_id} ${c.outcome}`;
    if (w > g.measureText(label).width + 8) {
      g.fillStyle = "#fff";
      g.fillText(label, x + 4, y + (BAND_H - 4) / 2);
    }
  });
}

function draw(m) {
  const bands = (Math.max(...m.lanes, -1) + 1) * BAND_H;
  // The overview: one colour per pixel column, from the turn that column stands for.
  const over = $("overview"), top = bands + 4;
  const { g, width } = prepare(over, top + STRIP_H + 8);
  const v = view(m, over, 0, m.n - 1);
  drawBands(m, g, v);
  m.columns = new Int32Array(Math.max(1, Math.floor(width)));
  for (let c = 0, t = 0; c < m.columns.length; c++) {
    const lo = (c / m.columns.length) * m.total, hi = ((c + 1) / m.columns.length) * m.total;
    while (t < m.n - 1 && m.start[t + 1] <= lo) t++;
    let best = t;
    for (let u = t + 1; u < m.n && m.start[u] < hi; u++) if (PRIORITY[m.status[u]] > PRIORITY[m.status[best]]) best = u;
    m.columns[c] = best;
    g.fillStyle = COLORS[m.status[best]];
    g.fillRect(c, top, 1, STRIP_H);
  }
  // Turns wide enough get a separator.
  g.fillStyle = "#fff";
  for (let t = 1; t < m.n && m.n <= width / 3; t++) g.fillRect(Math.round(v.x(t)), top, 1, STRIP_H);
  if (m.selected != null) marker(g, v, m.selected, top);
  m.overview = { v, top };
  // The lens: the turns around the selection, each wide enough to see and click.
  const s = m.selected ?? 0, a = Math.max(0, Math.min(s - LENS_TURNS / 2, m.n - LENS_TURNS)), b = Math.min(m.n - 1, a + LENS_TURNS - 1);
  const lens = $("lens"), lensG = prepare(lens, top + STRIP_H + 22).g, lv = view(m, lens, a, b);
  drawBands(m, lensG, lv);
  for (let t = a; t <= b; t++) {
    const x = lv.x(t), w = lv.x(t + 1) - x;
    lensG.fillStyle = COLORS[m.status[t]];
    lensG.fillRect(x, top, Math.max(1, w - 1), STRIP_H);
    if (w > lensG.measureText(String(t)).width + 4) {
      lensG.fillStyle = "#52606d";
      lensG.fillText(String(t), x + 2, top + STRIP_H + 10);
    }
  }
  if (m.selected != null) marker(lensG, lv, m.selected, top);
  m.lens = { v: lv, top };
}

function marker(g, v, t, top) {
  const x = v.x(t), w = Math.max(2, v.x(t + 1) - x);
  g.strokeStyle = "#1f2933";
  g.lineWidth = 2;
  g.strokeRect(x + 1, top - 1, w - 2, STRIP_H + 2);
}

// What a point of a canvas shows: a turn, a checkpoint's band, or nothing.
function hit(m, which, event) {
  const canvas = $(which), box = canvas.getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top, { v, top } = m[which];
  if (y < top - 4) {
    const lane = Math.floor(y / BAND_H);
    const i = m.checkpoints.findIndex((c, j) => m.lanes[j] === lane && c.advanced_to >= v.a && c.from <= v.b
      && x >= v.x(Math.max(c.from, v.a)) && x <= v.x(Math.min(c.advanced_to, v.b) + 1));
    return i < 0 ? null : { checkpoint: m.checkpoints[i] };
  }
  if (which === "overview") return { turn: m.columns[Math.min(m.columns.length - 1, Math.max(0, Math.floor(x)))] };
  let lo = v.a, hi = v.b;
  while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (v.x(mid) <= x) lo = mid; else hi = mid - 1; }
  return { turn: lo };
}

function describe(m, t) {
  const why = m.reason[t] ? ` (${m.reason[t]})` : "";
  const size = `${m.tokens[t]} tokens`;
  const cp = m.deciding[t] ? ` · checkpoint #${m.deciding[t]}` : "";
  return `turn ${t} · ${NAMES[m.status[t]]}${why}${cp} · ${size}`;
}
