// The questions sessions put to a person: each with the exact act and its detail as asked (shown
// as text, never as markup), the answers it takes, and, once resolved, who answered — whether
// this page, another browser or a terminal did. The open ones come from `approvals.pending` (the
// logs) on every connect and from `approval.asked` after; `approval.resolved` closes them.

import { h, put, shown, ANSWER_WORDS } from "./dom.js";

const KEEP_RESOLVED = 20;

export class Approvals {
  /** `conn`: the connection; `label(session)`: a session's name; `changed()`: the count moved. */
  constructor({ section, list, history, count, conn, label, changed }) {
    this.section = section;
    this.list = list;
    this.history = history;
    this.count = count;
    this.conn = conn;
    this.label = label;
    this.changed = changed;
    this.open = new Map();
  }

  key(session, question) {
    return `${session}/${question}`;
  }

  /** The questions open now (what a later `reset` may close). */
  keys() {
    return new Set(this.open.keys());
  }

  /**
   * Takes `approvals` (from `approvals.pending`) as the open questions. Only those in `before`
   * (open when the list was asked for) may be closed by it: a question asked while the list was
   * on its way is not in it, yet open.
   */
  reset(approvals, before) {
    const seen = new Set();
    for (const q of approvals) {
      const key = this.key(q.session, q.question);
      seen.add(key);
      if (!this.open.has(key)) this.asked(q);
    }
    for (const [key, entry] of this.open) {
      if (!seen.has(key) && before.has(key)) {
        entry.el.remove();
        this.open.delete(key);
      }
    }
    this.refresh();
  }

  /** Open questions of `session` (or of all). */
  waiting(session) {
    return [...this.open.values()].filter((e) => !session || e.q.session === session).length;
  }

  /** A new question (`approval.asked`). */
  asked(q) {
    const key = this.key(q.session, q.question);
    if (this.open.has(key)) return;
    const status = h("p", { class: "status", role: "status" });
    // A secret (the password git asks for) is typed into a password field: masked, never
    // remembered by the browser, emptied once sent, and no free note beside it to mistype into.
    const secret = q.secret === true;
    const note = secret ? null : h("input", {
      type: "text", class: "note", placeholder: "A note, logged with the answer (optional)",
      aria: { label: "Note for the answer" },
    });
    let reply = null;
    if (q.answers.includes("reply")) {
      reply = secret
        ? h("input", {
          type: "password", class: "reply secret", autocomplete: "off", spellcheck: false,
          placeholder: "Password (not shown, not kept)", aria: { label: "The password" },
        })
        : h("textarea", { class: "reply", rows: 3, aria: { label: "Your reply" } });
    }
    const buttons = q.answers
      .filter((a) => a !== "none")
      .map((answer) => h("button", {
        type: "button",
        class: `answer ${answer === "deny" ? "danger" : answer === "allow_once" ? "primary" : ""}`,
        dataset: { answer },
        disabled: !q.answerable,
        onclick: () => this.answer(q, answer, { note, reply, status, buttons }),
      }, ANSWER_WORDS[answer] ?? answer));
    const title = q.action ? q.action : "A question from the agent";
    const el = h("article", {
      class: "approval",
      dataset: { question: q.question, session: q.session, action: q.action ?? "", secret: secret ? "true" : null },
      aria: { label: `Question ${q.question} of session ${q.session}` },
    },
    h("header", {},
      h("span", { class: "act" }, title),
      h("a", { href: `#/s/${encodeURIComponent(q.session)}`, class: "session-link" }, this.label(q.session))),
    h("pre", { class: "what" }, shown(q.what)),
    h("div", { class: "meta" },
      q.decided_by ? `rule: ${q.decided_by}` : "",
      q.decision ? ` · table says ${q.decision}` : "",
      ` · asks a ${q.asked} · ${q.question}`),
    q.answerable ? null : h("p", { class: "warn" },
      "Its session does not run in this daemon now: this question cannot be answered here."),
    reply,
    h("div", { class: "answers" }, buttons, q.answerable ? note : null),
    status);
    this.list.append(el);
    this.open.set(key, { q, el });
    this.refresh();
  }

  async answer(q, answer, { note, reply, status, buttons }) {
    for (const b of buttons) b.disabled = true;
    status.textContent = "Sending…";
    const params = { session: q.session, question: q.question, answer };
    if (note && note.value.trim()) params.reasons = note.value.trim();
    if (answer === "reply") params.reply = reply ? reply.value : "";
    // A secret leaves the field as it is sent: the page keeps no copy, whatever comes back.
    if (q.secret === true && reply) reply.value = "";
    try {
      await this.conn.call("approvals.answer", params);
      status.textContent = "Answered; waiting for the session…";
    } catch (e) {
      status.textContent = `Not taken: ${e.message}`;
      status.dataset.error = e.kind;
      for (const b of buttons) b.disabled = !q.answerable;
    } finally {
      if (q.secret === true) delete params.reply;
    }
  }

  /** A question was resolved (`approval.resolved`): who answered, and it leaves the open list. */
  resolved(r) {
    const key = this.key(r.session, r.question);
    const entry = this.open.get(key);
    this.open.delete(key);
    const words = r.answer ? ANSWER_WORDS[r.answer] ?? r.answer : "Nobody answered (refused)";
    const line = h("li", {
      class: `resolved ${r.answer === "deny" || !r.answer ? "no" : "yes"}`,
      dataset: { question: r.question, session: r.session, answer: r.answer ?? "none", resolvedBy: r.by ?? "" },
    },
    h("strong", {}, words),
    ` — ${r.by ? `answered by ${r.by}` : "nobody answered"} · `,
    entry?.q.action ? h("code", {}, entry.q.action) : `${r.question}`,
    ` · ${this.label(r.session)}`,
    entry ? h("details", {}, h("summary", {}, "What was asked"), h("pre", { class: "what" }, shown(entry.q.what))) : null);
    if (entry) entry.el.remove();
    this.history.prepend(line);
    while (this.history.children.length > KEEP_RESOLVED) this.history.lastElementChild.remove();
    this.refresh();
  }

  refresh() {
    const n = this.open.size;
    put(this.count, n === 0 ? "none waiting" : `${n} waiting`);
    this.section.dataset.waiting = String(n);
    this.section.hidden = n === 0 && this.history.children.length === 0;
    this.changed();
  }
}
