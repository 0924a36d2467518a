// The coverage map (served by src/http/ui.rs). Plain script, no framework, no build step.
// /ui/ lists conversations; /ui/conversations/{c} draws one as a strip of turns, to scale by
// tokens, with its checkpoints as bands above. Everything comes from the REST API, with the key
// the person types once (kept in sessionStorage, sent as a bearer header).
"use strict";

const KEY = "gatekeeper-api-key";
const $ = (id) => document.getElementById(id);
// The service may sit under a path prefix: the API is wherever /ui/ is.
const BASE = location.pathname.slice(0, location.pathname.indexOf("/ui/"));

class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; }
}

// ---- the API and the key ----------------------------------------------------------------
let keyPrompt = null;

async function api(path) {
  for (;;) {
    const key = sessionStorage.getItem(KEY);
    const headers = { Accept: "application/json" };
    if (key) headers.Authorization = "Bearer " + key;
    const response = await fetch(BASE + path, { headers });
    if (response.status === 401) {
      // Without keys configured the service answers on loopback without one; otherwise ask.
      sessionStorage.removeItem(KEY);
      await askForKey(key ? "That key was refused. Try another." : "This service needs an API key.");
      continue;
    }
    const body = await response.json().catch(() => null);
    if (!response.ok) throw new ApiError(response.status, (body && body.detail) || response.statusText);
    return body;
  }
}

function askForKey(message) {
  // Requests that meet the 401 together wait for the same answer.
  keyPrompt ??= new Promise((resolve) => {
    const dialog = $("key-dialog"), input = $("key-input");
    $("key-message").textContent = message;
    input.value = "";
    $("key-form").onsubmit = (event) => {
      event.preventDefault();
      sessionStorage.setItem(KEY, input.value.trim());
      dialog.close();
      keyPrompt = null;
      $("forget-key").hidden = false;
      resolve();
    };
    dialog.oncancel = (event) => event.preventDefault(); // nothing can be shown without it
    dialog.showModal();
    input.focus();
  });
  return keyPrompt;
}

function fail(error) {
  document.body.dataset.state = "error";
  $("error").textContent = error.message;
  $("error").hidden = false;
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

const mapUrl = (c) => `${BASE}/ui/conversations/${encodeURIComponent(c)}`;

// ---- the list -----------------------------------------------------------------------------
let listCursor = null;

async function showList() {
  $("list-view").hidden = false;
  $("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    location.assign(mapUrl($("open-name").value.trim()));
  });
  $("filter-form").addEventListener("submit", (event) => {
    event.preventDefault();
    loadList(true).catch(fail);
  });
  $("more").addEventListener("click", () => loadList(false).catch(fail));
  await loadList(true);
  document.body.dataset.state = "ready";
}

async function loadList(fresh) {
  const query = new URLSearchParams({ limit: "100" });
  const prefix = $("prefix").value.trim();
  if (prefix) query.set("prefix", prefix);
  if (!fresh && listCursor) query.set("cursor", listCursor);
  const page = await api(`/v1/conversations?${query}`);
  const rows = $("conversations").tBodies[0];
  if (fresh) rows.replaceChildren();
  for (const c of page.conversations) {
    const row = rows.insertRow(), link = el("a", c.conversation);
    link.href = mapUrl(c.conversation);
    row.insertCell().append(link);
    row.insertCell().append(c.turns.toLocaleString("en"));
    row.insertCell().append(c.latest_checkpoint_id == null ? "none" : "#" + c.latest_checkpoint_id);
    row.cells[1].className = row.cells[2].className = "num";
  }
  listCursor = page.next_cursor ?? null;
  $("more").hidden = listCursor == null;
  $("list-note").hidden = rows.rows.length > 0;
  $("list-note").textContent = "No conversations" + (prefix ? ` start with “${prefix}”.` : " yet.");
}

// ---- one conversation ---------------------------------------------------------------------
async function showMap(conversation) {
  $("map-view").hidden = false;
  $("title").textContent = conversation;
  document.title = `${conversation} · coverage map`;
  const root = `/v1/conversations/${encodeURIComponent(conversation)}`;
  const started = performance.now();
  const m = await load(root);
  m.lanes = lanes(m.checkpoints);
  legend(m);
  if (m.n === 0) {
    $("facts").textContent = "No turns yet.";
    document.body.dataset.state = "ready";
    return;
  }
  draw(m);
  const ms = Math.round(performance.now() - started);
  $("facts").textContent = `${m.n.toLocaleString("en")} turns · ${m.totalTokens.toLocaleString("en")} tokens · `
    + `${m.checkpoints.length} checkpoints · drawn from ${m.requests} requests in ${ms} ms`;
  for (const which of ["overview", "lens"]) {
    const canvas = $(which);
    canvas.addEventListener("click", (event) => {
      const found = hit(m, which, event);
      if (found && found.turn != null) select(m, root, found.turn).catch(fail);
      else if (found) showCheckpoint(m, root, found.checkpoint).catch(fail);
    });
    canvas.addEventListener("mousemove", (event) => {
      const found = hit(m, which, event);
      $("hover").textContent = !found ? "" : found.turn != null ? describe(m, found.turn)
        : `checkpoint #${found.checkpoint.checkpoint_id} · ${found.checkpoint.outcome} · turns ${found.checkpoint.from}–${found.checkpoint.advanced_to}`;
    });
    canvas.addEventListener("keydown", (event) => {
      const step = { ArrowLeft: -1, ArrowRight: 1 }[event.key];
      if (!step) return;
      event.preventDefault();
      select(m, root, Math.max(0, Math.min(m.n - 1, (m.selected ?? -step) + step))).catch(fail);
    });
  }
  window.addEventListener("resize", () => draw(m));
  // Where each turn is drawn, for tests and the console.
  window.coverageMap = {
    turns: m.n,
    spanOf: (which, t) => ({ x: m[which].v.x(t), width: m[which].v.x(t + 1) - m[which].v.x(t), top: m[which].top }),
    statusOf: (t) => NAMES[m.status[t]],
  };
  document.body.dataset.drawMs = String(ms);
  document.body.dataset.state = "ready";
}

function legend(m) {
  const counts = [0, 0, 0, 0], reasons = {};
  for (let t = 0; t < m.n; t++) {
    counts[m.status[t]]++;
    if (m.status[t] === RAW) reasons[m.reason[t]] = (reasons[m.reason[t]] || 0) + 1;
  }
  const why = Object.entries(reasons).map(([r, n]) => `${n} ${r}`).join(", ");
  const items = [
    ["summary", `summary: ${counts[SUMMARY]} turns a summary stands for`],
    ["raw_log", `raw_log: ${counts[RAW]} turns spanned but not covered` + (why ? ` (${why})` : "")],
    ["pinned", `pinned: ${counts[PINNED]} pinned turns`],
    ["live", `live: ${counts[LIVE]} turns no checkpoint spans`],
    ["band", "checkpoint: from its first turn to the last it advanced over"],
  ];
  $("legend").replaceChildren(...items.map(([kind, text]) => {
    const item = el("li");
    item.dataset.kind = kind;
    item.append(el("span", undefined, "swatch " + kind), text);
    return item;
  }));
}

let selectSeq = 0;

async function select(m, root, t) {
  m.selected = t;
  draw(m);
  $("hover").textContent = describe(m, t);
  const seq = ++selectSeq;
  const [turn, rec] = await Promise.all([api(`${root}/turns/${t}`), api(`${root}/reconstruct/${t}`)]);
  if (seq !== selectSeq) return; // a later click won
  const detail = rec.checkpoint_id == null ? null : m.details.get(rec.checkpoint_id);
  showPanel(`Turn ${t} · ${turn.role}`, { turn: t, source: rec.source }, [
    ["source", rec.source + (rec.reason ? ` (${rec.reason})` : "")],
    ["checkpoint", rec.checkpoint_id == null ? "none spans it" : "#" + rec.checkpoint_id],
    ["tokens", String(turn.tokens)],
    ["pinned", turn.pinned ? "yes" : "no"],
    ["anchors", `${turn.anchors.join(", ") || "none"} (${turn.anchor_origin})`],
  ]);
  const own = detail && detail.turns.find((d) => d.id === t);
  const missing = own ? own.missing_anchors : [];
  $("detail-why").textContent = {
    summary: `The summary of checkpoint #${rec.checkpoint_id} stands for this turn; the anchors that decided it are highlighted in it.`,
    raw_log: `Checkpoint #${rec.checkpoint_id} spans this turn but does not cover it (${rec.reason}): reconstruct answers the raw turn.`,
    live: "No checkpoint spans this turn yet: it is live.",
  }[rec.source];
  $("missing").hidden = rec.source !== "raw_log";
  $("missing-anchors").replaceChildren(...(missing.length ? missing.map((a) => el("li", a)) : [el("li", `none (${rec.reason})`)]));
  if (rec.source === "summary") showSummary(`The summary that stands for it (checkpoint #${rec.checkpoint_id})`, rec.text, rec.evidence, "evidence");
  else if (detail) showSummary(`Checkpoint #${detail.checkpoint_id}'s summary, which does not stand for it`, detail.summary, [], "evidence");
  else $("summary").hidden = true;
  $("turn-text").replaceChildren(marked(turn.content, occurrences(turn.content, missing), "missing"));
}

async function showCheckpoint(m, root, c) {
  const detail = m.details.get(c.checkpoint_id) ?? await api(`${root}/compactions/${c.checkpoint_id}`);
  const count = (ranges) => ranges.reduce((n, [a, b]) => n + b - a + 1, 0);
  showPanel(`Checkpoint #${c.checkpoint_id} · ${c.outcome}`, { checkpoint: c.checkpoint_id }, [
    ["range", `turns ${c.from}–${c.to}, advanced to ${c.advanced_to}`],
    ["covered", `${count(c.covered)} turns`],
    ["uncovered", `${count(c.uncovered)} turns`],
    ["not compacted", `${count(c.not_compacted)} turns`],
    ["summary", `${detail.summary_tokens} tokens for ${detail.prefix_tokens} (budget ${detail.summary_budget})`],
    ["created", c.created_at],
  ]);
  $("detail-why").textContent = m.decides.has(c.checkpoint_id) ? "" : "A newer checkpoint decides every turn this one spans.";
  $("missing").hidden = true;
  showSummary("Its summary", detail.summary, [], "evidence");
  $("turn-heading").hidden = $("turn-text").hidden = true;
}

function showPanel(title, data, pairs) {
  const panel = $("detail");
  panel.hidden = false;
  for (const key of Object.keys(panel.dataset)) delete panel.dataset[key];
  Object.assign(panel.dataset, data);
  $("detail-title").textContent = title;
  $("detail-facts").replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", k), el("dd", String(v))]));
  $("turn-heading").hidden = $("turn-text").hidden = false;
}

function showSummary(heading, text, spans, kind) {
  $("summary").hidden = false;
  $("summary-heading").textContent = heading;
  $("summary-text").replaceChildren(marked(text, spans, kind));
}

// `text` with `spans` ([start, end) in characters, as the API counts them) as <mark>s.
function marked(text, spans, kind) {
  const chars = Array.from(text), out = document.createDocumentFragment();
  let at = 0;
  for (const s of [...spans].sort((x, y) => x.start - y.start)) {
    if (s.start < at) continue; // overlapping: the first one shows
    out.append(chars.slice(at, s.start).join(""));
    const mark = el("mark", chars.slice(s.start, s.end).join(""), kind);
    mark.title = s.anchor;
    out.append(mark);
    at = s.end;
  }
  out.append(chars.slice(at).join(""));
  return out;
}

// Where the turn says each missing anchor (ignoring case): what the summary should have kept.
function occurrences(text, anchors) {
  // Lowered a character at a time, so that the offsets stay the original's.
  const lower = (s) => Array.from(s, (c) => c.toLowerCase());
  const chars = lower(text), spans = [];
  for (const anchor of anchors) {
    const a = lower(anchor);
    for (let i = 0; a.length && i + a.length <= chars.length; i++) {
      if (a.every((c, j) => chars[i + j] === c)) spans.push({ anchor, start: i, end: i + a.length });
    }
  }
  return spans;
}

function main() {
  $("forget-key").hidden = !sessionStorage.getItem(KEY);
  $("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    location.reload();
  });
  const match = location.pathname.match(/\/ui\/conversations\/([^/]+)$/);
  (match ? showMap(decodeURIComponent(match[1])) : showList()).catch(fail);
}

main();
