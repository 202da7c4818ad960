// The log: every event of the session as recorded (seq, time, kind, call, its fields, the hash
// it chains from), and the chain's status as `log.verify` finds it — intact or where it breaks,
// and whether the log is sealed.

import { h, put, when, clip, short } from "./dom.js";

const SEAL_WORDS = {
  unsealed: "not sealed",
  sealed: "sealed (the seal holds)",
  broken: "seal BROKEN",
};

export class LogView {
  constructor({ els, conn }) {
    this.els = els;
    this.conn = conn;
    this.model = null;
    this.unlisten = null;
    this.filter = "";
    els.verify.addEventListener("click", () => this.verify());
    els.filter.addEventListener("input", () => {
      this.filter = els.filter.value.trim().toLowerCase();
      this.render();
    });
  }

  show(model) {
    if (this.unlisten) this.unlisten();
    this.model = model;
    put(this.els.status, "Not verified yet.");
    this.els.status.removeAttribute("data-intact");
    this.els.status.removeAttribute("data-seal");
    this.render();
    this.unlisten = model.listen((c) => {
      if (c.event && this.matches(c.event)) this.els.rows.append(this.row(c.event));
    });
  }

  matches(e) {
    if (!this.filter) return true;
    return e.kind.toLowerCase().includes(this.filter) || String(e.call_id ?? "").toLowerCase().includes(this.filter);
  }

  render() {
    if (!this.model) return;
    put(this.els.rows, this.model.events.filter((e) => this.matches(e)).map((e) => this.row(e)));
  }

  row(e) {
    const data = JSON.stringify(e.data);
    return h("tr", { dataset: { seq: e.seq, kind: e.kind } },
      h("td", { class: "num" }, String(e.seq)),
      h("td", { class: "time" }, h("time", { datetime: e.ts, title: e.ts }, when(e.ts))),
      h("td", {}, h("code", {}, e.kind)),
      h("td", {}, e.call_id ? h("code", {}, e.call_id) : ""),
      h("td", { class: "data" }, data.length > 160
        ? h("details", {}, h("summary", {}, clip(data, 120)), h("pre", { class: "json" }, JSON.stringify(e.data, null, 2)))
        : h("code", {}, data)),
      h("td", { class: "hash" }, h("code", { title: e.prev }, short(e.prev, 10))));
  }

  async verify() {
    if (!this.model) return;
    const session = this.model.id;
    this.els.verify.disabled = true;
    put(this.els.status, "Verifying…");
    try {
      const v = await this.conn.call("log.verify", { session });
      if (this.model?.id !== session) return;
      const st = this.els.status;
      st.dataset.intact = String(v.intact);
      st.dataset.seal = v.seal;
      put(st,
        h("strong", { class: v.intact ? "good" : "bad" }, v.intact ? "Chain intact" : "Chain BROKEN"),
        ` · ${v.lines} line(s)`,
        v.head_seq !== null && v.head_seq !== undefined ? ` · head seq ${v.head_seq}` : "",
        v.head_hash ? [" · head ", h("code", { title: v.head_hash }, short(v.head_hash, 16))] : "",
        ` · ${SEAL_WORDS[v.seal] ?? v.seal}`,
        v.events_after_seal ? ` · ${v.events_after_seal} event(s) after the seal` : "",
        v.torn_tail ? " · a torn last line (a crash, not a break)" : "",
        v.problems.length ? h("ul", { class: "problems" }, v.problems.map((p) => h("li", {}, p))) : "");
    } catch (e) {
      put(this.els.status, `Verify failed: ${e.message}`);
    } finally {
      this.els.verify.disabled = false;
    }
  }
}
