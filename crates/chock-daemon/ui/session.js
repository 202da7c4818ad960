// What the page knows of one session: its log events in seq order (the record, rebuilt from a
// subscription) and what follows from them — the task, the title, the plan, the cost so far, the
// applies. Live items (text streaming, a command's output) are passed on to whoever shows the
// session but never kept: a later subscription rebuilds the view from the log alone.

export class SessionModel {
  constructor(id) {
    this.id = id;
    this.events = [];
    /** The last seq taken (-1: none): a resubscription starts at `lastSeq + 1`. */
    this.lastSeq = -1;
    /** Whether this page's connection is subscribed now (cleared on every disconnect). */
    this.subscribed = false;
    this.listeners = new Set();
    this.task = null;
    this.title = null;
    this.plan = [];
    this.cost = 0;
    this.costKnown = true;
    this.anyCost = false;
    this.turns = 0;
    this.ended = null;
    this.start = null;
    /** Apply records (`workspace.apply` events), oldest first. */
    this.applies = [];
  }

  /** Calls `fn(change)` for each new event (`{event}`) or live item (`{live, afterSeq}`). */
  listen(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /**
   * Takes one log event. Returns `"new"`, `"old"` (a seq already taken: ignored) or `"gap"`
   * (a seq past the next one: the caller resubscribes from `lastSeq + 1`).
   */
  add(event) {
    if (event.seq <= this.lastSeq) return "old";
    if (event.seq !== this.lastSeq + 1) return "gap";
    this.lastSeq = event.seq;
    this.events.push(event);
    this.derive(event);
    for (const fn of this.listeners) fn({ event });
    return "new";
  }

  /** Passes a live item on. */
  live(item, afterSeq) {
    for (const fn of this.listeners) fn({ live: item, afterSeq });
  }

  derive(event) {
    const d = event.data || {};
    switch (event.kind) {
      case "session.start":
        this.start = d;
        break;
      case "turn.start":
        this.turns = Math.max(this.turns, d.turn || 0);
        if (d.input && this.task === null) this.task = d.input;
        break;
      case "model.response":
        this.anyCost = true;
        if (d.cost_usd === null || d.cost_usd === undefined) this.costKnown = false;
        else this.cost += d.cost_usd;
        break;
      case "tool.call":
        if (d.tool === "update_plan" && Array.isArray(d.input?.steps)) {
          this.plan = d.input.steps.map((s) => ({
            step: String(s.step ?? ""),
            status: String(s.status ?? "pending"),
          }));
        } else if (d.tool === "set_title" && typeof d.input?.title === "string") {
          this.title = d.input.title;
        }
        break;
      case "workspace.apply":
        this.applies.push(d);
        break;
      case "session.end":
        this.ended = d;
        break;
      default:
        break;
    }
  }

  /** The cost so far in US dollars: null when some price is unknown. */
  costSoFar() {
    if (!this.anyCost) return 0;
    return this.costKnown ? this.cost : null;
  }

  /** The applies not undone yet (newest first): what an undo may name. */
  undoable() {
    const undone = new Set(this.applies.filter((a) => a.kind === "undo").map((a) => a.undo_of));
    return this.applies
      .filter((a) => a.kind === "apply" && !undone.has(a.apply_id))
      .reverse();
  }
}
