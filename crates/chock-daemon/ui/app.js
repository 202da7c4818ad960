// The browser UI's entry: one WebSocket to the daemon, the sessions list, starting a session,
// and the open session (its activity, review and log). The log is the source of what a session
// shows: the page subscribes from the last seq it has plus one, on opening a session and again
// on every reconnect, so a dropped connection costs nothing.

import { h, put, byId, money, when, basename, clip, short, stateBadge, providerName, shownPath } from "./dom.js";
import { Connection, redeemLoginLink } from "./rpc.js";
import { SessionModel } from "./session.js";
import { Timeline, renderPlan } from "./timeline.js";
import { Approvals } from "./approvals.js";
import { Review } from "./review.js";
import { LogView } from "./logview.js";

const models = new Map();
/** The daemon's view of every session (`sessions.list`), by id. */
const infos = new Map();
let current = null;
let tab = "activity";

const conn = new Connection({ onNotice: notice, onStatus: status, onOpen: opened });

function model(id) {
  let m = models.get(id);
  if (!m) {
    m = new SessionModel(id);
    m.listen(() => {
      if (id === current) later(head);
      later(renderList);
    });
    models.set(id, m);
  }
  return m;
}

const queued = new Set();
/** Runs `fn` once on the next frame, however often it was asked for before then. */
function later(fn) {
  if (queued.has(fn)) return;
  queued.add(fn);
  requestAnimationFrame(() => {
    queued.delete(fn);
    fn();
  });
}

/** A message in the corner: gone after a while, or (a failure of the page itself) on a click. */
function toast(text, kind) {
  const el = h("div", { class: `toast ${kind || ""}`, role: "alert" }, text);
  byId("toasts").append(el);
  if (kind === "js-error") el.addEventListener("click", () => el.remove());
  else setTimeout(() => el.remove(), 8000);
}

window.addEventListener("error", (e) => toast(`The page failed: ${e.message}`, "js-error"));
window.addEventListener("unhandledrejection", (e) =>
  toast(`The page failed: ${e.reason?.message ?? e.reason}`, "js-error"));

function label(id) {
  const m = models.get(id);
  const info = infos.get(id);
  return clip(shownPath(m?.title || info?.title || m?.task || short(id, 24)), 48);
}

const approvals = new Approvals({
  section: byId("approvals"),
  list: byId("approval-list"),
  history: byId("approval-history"),
  count: byId("approvals-count"),
  conn,
  label,
  changed: () => later(renderList),
});

const timeline = new Timeline(byId("timeline"));
const review = new Review({
  conn,
  refresh: resubscribe,
  els: {
    load: byId("review-load"), summary: byId("review-summary"), files: byId("review-files"),
    selected: byId("review-selected"), digest: byId("review-digest"), apply: byId("review-apply"),
    status: byId("review-status"), result: byId("review-result"), applies: byId("review-applies"),
    patch: byId("review-patch"),
  },
});
const logview = new LogView({
  conn,
  els: { verify: byId("verify"), status: byId("verify-status"), rows: byId("log-rows"), filter: byId("log-filter") },
});

// ---- the connection ----

function status(state, why) {
  const el = byId("conn-status");
  el.dataset.state = state;
  const words = { connecting: "connecting…", open: "connected", closed: "disconnected", forbidden: "not signed in" };
  put(el, words[state] ?? state, why && state !== "forbidden" ? ` (${why})` : "");
  const banner = byId("banner");
  if (state === "forbidden") {
    put(banner, "This page is not signed in to the daemon: open the one-time link that ",
      h("code", {}, "chock serve --host"), " printed (it signs this page in). The daemon said: ", why);
    banner.hidden = false;
  } else if (state === "open") {
    banner.hidden = true;
  }
  if (state !== "open") for (const m of models.values()) m.subscribed = false;
}

async function opened() {
  await Promise.all([listSessions(), pendingApprovals()]);
  if (current) subscribe(current);
}

async function listSessions() {
  try {
    const r = await conn.call("sessions.list");
    infos.clear();
    for (const s of r.sessions) infos.set(s.session, s);
    renderList();
    if (current) head();
  } catch (e) {
    if (e.kind !== "disconnected") toast(`Listing sessions failed: ${e.message}`);
  }
}

async function pendingApprovals() {
  try {
    const before = approvals.keys();
    const r = await conn.call("approvals.pending", {});
    approvals.reset(r.approvals, before);
  } catch (e) {
    if (e.kind !== "disconnected") toast(`Reading the open questions failed: ${e.message}`);
  }
}

async function subscribe(id) {
  const m = model(id);
  if (m.subscribed || !conn.open) return;
  m.subscribed = true;
  try {
    await conn.call("sessions.subscribe", { session: id, from_seq: m.lastSeq + 1 });
  } catch (e) {
    m.subscribed = false;
    if (e.kind !== "disconnected") toast(`Subscribing to ${short(id, 24)} failed: ${e.message}`);
  }
}

/** Subscribes again from the last seq seen (a session that has ended sends its log only once). */
function resubscribe(id) {
  const m = model(id);
  m.subscribed = false;
  if (id === current) subscribe(id);
}

function notice(method, p) {
  switch (method) {
    case "session.event": {
      const m = model(p.session);
      if (m.add(p.event) === "gap") resubscribe(p.session);
      const info = infos.get(p.session);
      if (info) Object.assign(info, { last_kind: p.event.kind, last_ts: p.event.ts, last_seq: p.event.seq });
      break;
    }
    case "session.live":
      model(p.session).live(p.event, p.after_seq);
      break;
    case "session.state": {
      const info = infos.get(p.session);
      if (info) info.state = p.state;
      else listSessions();
      later(renderList);
      if (p.session === current) later(head);
      break;
    }
    case "approval.asked":
      approvals.asked(p);
      break;
    case "approval.resolved":
      approvals.resolved(p);
      break;
    case "client.dropped":
      toast(`The daemon dropped this page (${p.reason}); reconnecting and catching up from the log.`);
      break;
    default:
      break;
  }
}

// ---- the sessions list ----

function renderList() {
  const list = byId("session-list");
  const ids = [...new Set([...infos.keys(), ...models.keys()])];
  ids.sort().reverse();
  put(list, ids.length ? ids.map((id) => item(id)) : h("li", { class: "empty" }, "No sessions yet."));
  const projects = new Set([...infos.values()].map((s) => s.project).filter(Boolean));
  put(byId("known-projects"), [...projects].map((p) => h("option", { value: p })));
}

function item(id) {
  const info = infos.get(id) || { state: "working" };
  const m = models.get(id);
  const waiting = approvals.waiting(id);
  const cost = m && m.lastSeq >= 0 ? m.costSoFar() : info.cost_usd;
  return h("li", {},
    h("a", {
      href: `#/s/${encodeURIComponent(id)}`, class: "session-item",
      dataset: { session: id, state: info.state }, aria: { current: id === current ? "page" : null },
    },
    h("span", { class: "line1" }, h("span", { class: "name" }, label(id)), " ", stateBadge(info.state),
      waiting ? h("span", { class: "badge asks", title: "questions waiting" }, `${waiting} asks`) : null),
    h("span", { class: "line2" },
      `${shownPath(basename(info.project || m?.start?.project))} · ${providerName(info.provider || m?.start?.provider)} · ${money(cost)}`),
    h("span", { class: "line3" }, info.last_kind ? `${info.last_kind} · ${when(info.last_ts)}` : short(id, 24))));
}

// ---- starting a session ----

byId("start-project").value = localStorage.getItem("chock.project") || "";
byId("start-provider").value = localStorage.getItem("chock.provider") || "demo";

byId("start-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const project = byId("start-project").value.trim();
  const task = byId("start-task").value.trim();
  const provider = byId("start-provider").value.trim();
  const modelName = byId("start-model").value.trim();
  const st = byId("start-status");
  const button = byId("start-submit");
  button.disabled = true;
  put(st, "Starting…");
  try {
    const r = await conn.call("sessions.start", {
      project, task, provider: provider || null, model: modelName || null, subscribe: true,
    });
    model(r.session).subscribed = true;
    localStorage.setItem("chock.project", project);
    localStorage.setItem("chock.provider", provider);
    byId("start-task").value = "";
    put(st, "");
    listSessions();
    location.hash = `#/s/${encodeURIComponent(r.session)}`;
  } catch (err) {
    put(st, `Not started (${err.kind}): ${err.message}`);
  } finally {
    button.disabled = false;
  }
});

// ---- the open session ----

function head() {
  if (!current) return;
  const m = model(current);
  const info = infos.get(current) || {};
  put(byId("session-title"), shownPath(m.title || info.title || clip(m.task || "", 120) || current));
  const st = byId("session-state");
  st.className = `badge state-${info.state}`;
  st.dataset.state = info.state || "";
  put(st, info.state || "…");
  put(byId("session-id"), current);
  put(byId("session-project"), shownPath(m.start?.project || info.project || ""));
  put(byId("session-provider"), `${m.start?.provider || info.provider || "?"} · ${m.start?.model || info.model || "?"}`);
  put(byId("session-cost"), money(m.lastSeq >= 0 ? m.costSoFar() : info.cost_usd));
  put(byId("session-turns"), String(m.turns));
  renderPlan(byId("plan"), m.plan);
  const working = info.state === "working";
  const runs = working || info.state === "idle";
  byId("send-followup").disabled = info.state !== "idle";
  byId("interrupt").disabled = !working;
  byId("end-session").disabled = !runs;
}

function open(id) {
  if (current && current !== id) {
    const old = model(current);
    if (old.subscribed && conn.open) conn.call("sessions.unsubscribe", { session: current }).catch(() => {});
    old.subscribed = false;
  }
  const fresh = current !== id;
  current = id;
  byId("start-pane").hidden = true;
  byId("session-pane").hidden = false;
  if (fresh) {
    const m = model(id);
    timeline.show(m);
    review.show(m);
    logview.show(m);
    showTab(tab);
  }
  head();
  renderList();
  subscribe(id);
}

function showTab(name) {
  tab = name;
  for (const t of ["activity", "review", "log"]) {
    byId(`tab-${t}`).setAttribute("aria-selected", String(t === name));
    byId(`panel-${t}`).hidden = t !== name;
  }
  if (name === "review" && current && review.stale()) review.load();
  if (name === "log" && current) logview.verify();
}

for (const t of ["activity", "review", "log"]) {
  byId(`tab-${t}`).addEventListener("click", () => showTab(t));
}

byId("composer").addEventListener("submit", async (e) => {
  e.preventDefault();
  const text = byId("followup").value.trim();
  if (!text || !current) return;
  const st = byId("composer-status");
  try {
    await conn.call("sessions.input", { session: current, text });
    byId("followup").value = "";
    put(st, "Sent.");
  } catch (err) {
    put(st, err.kind === "busy" ? "The session is working: wait until it is idle, or interrupt it." : `Not sent: ${err.message}`);
  }
});

byId("interrupt").addEventListener("click", async () => {
  if (!current) return;
  try {
    await conn.call("sessions.interrupt", { session: current });
    put(byId("composer-status"), "Interrupted.");
  } catch (err) {
    put(byId("composer-status"), `Not interrupted: ${err.message}`);
  }
});

/** Ending takes two clicks (no modal dialog: they block keyboards, screen readers and drivers). */
let endArmed = null;
byId("end-session").addEventListener("click", async () => {
  const button = byId("end-session");
  if (!current) return;
  if (endArmed !== current) {
    endArmed = current;
    put(button, "Click again to end");
    setTimeout(() => {
      endArmed = null;
      put(button, "End session");
    }, 4000);
    return;
  }
  endArmed = null;
  put(button, "End session");
  try {
    await conn.call("sessions.end", { session: current });
    put(byId("composer-status"), "Ended.");
  } catch (err) {
    put(byId("composer-status"), `Not ended: ${err.message}`);
  }
});

// ---- routing ----

function route() {
  const hash = location.hash;
  const m = hash.match(/^#\/s\/([^/]+)/);
  if (m) {
    open(decodeURIComponent(m[1]));
  } else {
    if (current) {
      const old = model(current);
      if (old.subscribed && conn.open) conn.call("sessions.unsubscribe", { session: current }).catch(() => {});
      old.subscribed = false;
    }
    current = null;
    byId("session-pane").hidden = true;
    byId("start-pane").hidden = false;
    renderList();
    if (hash === "#/new") byId("start-project").focus();
  }
}

window.addEventListener("hashchange", route);
setInterval(() => {
  if (conn.open && !document.hidden) listSessions();
}, 5000);
// A login link's code is traded for the token first; then connecting, before anything is drawn:
// nothing the page draws can keep it from reaching the daemon.
redeemLoginLink().then((refused) => {
  conn.connect();
  if (refused) status("forbidden", refused);
  route();
});
