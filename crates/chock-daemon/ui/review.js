// Review: the session's changes with a checkbox per file and per hunk. Each change of the
// selection asks the daemon for the diff of exactly that selection, and its digest is shown; the
// apply sends that same selection with that digest pinned, so what lands is what was shown (or
// nothing: `digest_mismatch`). An empty selection is never sent, because the protocol reads an
// absent selection as "everything". The applies come from the log, each with its undo.

import { h, put, short, shown, shownPath } from "./dom.js";

function hunkHead(k) {
  return `@@ -${k.old_start},${k.old_len} +${k.new_start},${k.new_len} @@`;
}

/**
 * One line of a hunk as the review shows it: its tabs kept, every other control, bidi control and
 * invisible character escaped (`shown`), so the line reads as the bytes that are applied.
 */
export function diffLine(line) {
  return `${shown(line, "\t")}\n`;
}

/** Paths as a list shows them, each escaped (`shownPath`): `harm\u{202e}txt.exe` stays in order. */
export function pathList(paths) {
  return paths.map(shownPath).join(", ");
}

function lineClass(line) {
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "ctx";
}

export class Review {
  constructor({ els, conn, refresh }) {
    this.els = els;
    this.conn = conn;
    this.refresh = refresh;
    this.model = null;
    this.unlisten = null;
    this.diff = null;
    this.boxes = [];
    this.ticket = 0;
    this.shown = null;
    this.busy = false;
    els.load.addEventListener("click", () => this.load());
    els.apply.addEventListener("click", () => this.apply());
  }

  /** Shows `model`'s review (the diff is loaded when the tab opens). */
  show(model) {
    if (this.unlisten) this.unlisten();
    this.model = model;
    this.diff = null;
    this.loadedAt = null;
    this.shown = null;
    this.boxes = [];
    put(this.els.files);
    put(this.els.summary, "Not loaded yet.");
    put(this.els.result);
    this.els.result.removeAttribute("data-apply-id");
    this.els.result.removeAttribute("data-undone-id");
    this.status("");
    this.applies();
    this.unlisten = model.listen((c) => {
      if (c.event?.kind === "workspace.apply") this.applies();
    });
    this.bar();
  }

  status(text, kind) {
    put(this.els.status, text);
    if (kind) this.els.status.dataset.kind = kind;
    else this.els.status.removeAttribute("data-kind");
  }

  /** Whether the diff shown predates the session's last event (or none is shown). */
  stale() {
    return !this.busy && (!this.diff || this.loadedAt !== this.model?.lastSeq);
  }

  async load() {
    if (!this.model) return;
    const session = this.model.id;
    const at = this.model.lastSeq;
    this.status("Loading the diff…");
    try {
      const diff = await this.conn.call("review.diff", { session });
      if (this.model?.id !== session) return;
      this.diff = diff;
      this.loadedAt = at;
      this.render();
      this.status("");
    } catch (e) {
      this.status(`The diff failed: ${e.message}`, "error");
    }
  }

  render() {
    const diff = this.diff;
    this.boxes = [];
    const added = diff.files.reduce((n, f) => n + f.added, 0);
    const removed = diff.files.reduce((n, f) => n + f.removed, 0);
    put(this.els.summary, diff.files.length === 0
      ? "The session changed nothing."
      : `${diff.files.length} file(s) changed, +${added} −${removed}. Whole diff's digest `,
      diff.files.length ? h("code", {}, short(diff.digest, 16)) : null);
    put(this.els.files, diff.files.map((f) => this.file(f)));
    this.changed();
  }

  file(f) {
    const fileBox = h("input", {
      type: "checkbox", class: "pick-file", checked: !f.policy_file, disabled: f.policy_file,
      dataset: { fileId: f.id }, aria: { label: `Select all of ${shownPath(f.path)}` },
    });
    const hunks = f.hunks.map((k, i) => {
      const box = h("input", {
        type: "checkbox", class: "pick-hunk", checked: !f.policy_file, disabled: f.policy_file,
        dataset: { hunkId: k.id }, aria: { label: `Select hunk ${i + 1} of ${shownPath(f.path)}` },
      });
      box.addEventListener("change", () => this.changed());
      return {
        box,
        el: h("div", { class: "hunk", dataset: { hunk: k.id, index: i } },
          h("label", { class: "hunk-head" }, box, " ", h("code", {}, hunkHead(k))),
          h("pre", { class: "diff" }, k.lines.map((l) =>
            h("span", { class: `dl ${lineClass(l)}` }, diffLine(l))))),
      };
    });
    fileBox.addEventListener("change", () => {
      for (const k of hunks) k.box.checked = fileBox.checked;
      this.changed();
    });
    this.boxes.push({ f, fileBox, hunks });
    const renamed = f.old_path ? ` (from ${shownPath(f.old_path)})` : "";
    return h("section", { class: "file", dataset: { file: f.id, path: f.path } },
      h("label", { class: "file-head" }, fileBox, " ",
        h("span", { class: `fstatus ${f.status}` }, f.status), " ",
        h("strong", {}, shownPath(f.path)), renamed, " ",
        h("span", { class: "counts" }, `+${f.added} −${f.removed}`)),
      f.policy_file ? h("p", { class: "warn" },
        "This file configures Chock: it is never applied from here (`chock apply --include-policy` at a terminal).") : null,
      f.binary ? h("p", { class: "line" }, "Binary file: no hunks to show.") : null,
      !f.binary && f.hunks.length === 0 ? h("p", { class: "line" }, `Whole file ${f.status}.`) : null,
      hunks.map((k) => k.el));
  }

  /** The selection the checkboxes make: whole files where every hunk is picked, else hunks. */
  selection() {
    const files = [];
    const hunks = [];
    for (const { f, fileBox, hunks: ks } of this.boxes) {
      if (f.policy_file) continue;
      if (ks.length === 0) {
        if (fileBox.checked) files.push(f.id);
        continue;
      }
      const picked = ks.filter((k) => k.box.checked);
      fileBox.checked = picked.length === ks.length;
      fileBox.indeterminate = picked.length > 0 && picked.length < ks.length;
      if (picked.length === ks.length) files.push(f.id);
      else hunks.push(...picked.map((k) => k.box.dataset.hunkId));
    }
    return { files, hunks };
  }

  /** The selection moved: ask for its digest (the newest answer wins). */
  async changed() {
    const selection = this.selection();
    const key = JSON.stringify(selection);
    this.shown = null;
    this.bar();
    if (selection.files.length === 0 && selection.hunks.length === 0) return;
    const ticket = ++this.ticket;
    const session = this.model.id;
    try {
      const diff = await this.conn.call("review.diff", { session, selection });
      if (ticket !== this.ticket || this.model?.id !== session) return;
      this.shown = { key, selection, digest: diff.digest, files: diff.files, patch: diff.patch };
    } catch (e) {
      if (ticket === this.ticket) this.status(`The selection's diff failed: ${e.message}`, "error");
    }
    this.bar();
  }

  bar() {
    const s = this.shown;
    const selection = this.boxes.length ? this.selection() : { files: [], hunks: [] };
    const empty = selection.files.length === 0 && selection.hunks.length === 0;
    if (s) {
      const hunks = s.files.reduce((n, f) => n + Math.max(f.hunks.length, 1), 0);
      put(this.els.selected, `${hunks} change(s) in ${s.files.length} file(s) selected`);
      put(this.els.digest, short(s.digest, 16));
      this.els.digest.dataset.digest = s.digest;
      this.els.digest.title = s.digest;
      put(this.els.patch, shown(s.patch, "\n\t"));
    } else {
      put(this.els.selected, empty ? (this.diff ? "Nothing selected." : "") : "Taking the selection's digest…");
      put(this.els.digest, "—");
      this.els.digest.removeAttribute("data-digest");
      put(this.els.patch);
    }
    this.els.apply.disabled = !s || this.busy;
  }

  async apply() {
    const s = this.shown;
    if (!s || this.busy) return;
    const session = this.model.id;
    this.busy = true;
    this.bar();
    this.status("Applying: the session's policy decides (a question may be waiting above)…", "waiting");
    try {
      const r = await this.conn.call("review.apply", { session, digest: s.digest, selection: s.selection });
      put(this.els.result, r.paths.length
        ? `Applied to the project: ${pathList(r.paths)} (apply ${r.apply_id}, digest ${short(r.digest, 16)})`
        : "Nothing written: the project already held the selection.",
      r.already?.length ? ` Already there: ${pathList(r.already)}.` : "");
      if (r.apply_id) this.els.result.dataset.applyId = r.apply_id;
      this.status("Applied.", "ok");
    } catch (e) {
      this.status(this.why(e), "error");
      if (e.kind === "digest_mismatch") await this.load();
    } finally {
      this.busy = false;
      this.bar();
      this.refresh(session);
    }
  }

  async undo(applyId, button) {
    const session = this.model.id;
    button.disabled = true;
    this.status(`Undoing ${applyId}: the session's policy decides (a question may be waiting above)…`, "waiting");
    try {
      const r = await this.conn.call("review.undo", { apply_id: applyId });
      put(this.els.result, `Undone: ${pathList(r.paths) || "nothing to revert"} (apply ${applyId}).`,
        r.kept_dirs?.length ? ` Kept directories holding other files: ${pathList(r.kept_dirs)}.` : "");
      this.els.result.dataset.undoneId = applyId;
      this.status("Undone.", "ok");
    } catch (e) {
      this.status(this.why(e), "error");
      button.disabled = false;
    } finally {
      this.refresh(session);
    }
  }

  why(e) {
    switch (e.kind) {
      case "digest_mismatch":
        return `Nothing written: the changes are no longer the ones shown (${e.message}). The diff was reloaded.`;
      case "refused":
        return `Refused, nothing written: ${e.message}`;
      case "conflict":
        return `Nothing written: the project no longer holds what the change expects (${e.message}).`;
      default:
        return `Failed (${e.kind}): ${e.message}`;
    }
  }

  /** The applies in the log, newest first, each with its undo while it stands. */
  applies() {
    const m = this.model;
    const undoable = new Set(m.undoable().map((a) => a.apply_id));
    const undoneBy = new Map(m.applies.filter((a) => a.kind === "undo").map((a) => [a.undo_of, a.apply_id]));
    const rows = m.applies.filter((a) => a.kind === "apply").reverse().map((a) => {
      const undo = undoable.has(a.apply_id)
        ? h("button", { type: "button", class: "danger", dataset: { undo: a.apply_id } }, "Undo")
        : h("span", { class: "badge" }, `undone by ${undoneBy.get(a.apply_id) ?? "?"}`);
      if (undo.tagName === "BUTTON") undo.addEventListener("click", () => this.undo(a.apply_id, undo));
      return h("li", { dataset: { apply: a.apply_id, undone: !undoable.has(a.apply_id) } },
        h("code", {}, a.apply_id), ` ${a.files.length} path(s): ${pathList(a.files.map((f) => f.path))}`,
        a.hunks.length ? ` · ${a.hunks.length} hunk(s)` : " · whole files",
        a.digest ? ` · digest ${short(a.digest, 12)}` : "", " ", undo);
    });
    put(this.els.applies, rows.length ? rows : h("li", { class: "empty" }, "Nothing applied from this session yet."));
  }
}
