// The live session: the conversation and every tool call, built from the log's events (each call
// a card: its input, the decision and who made it, a question and its answer, a command's output
// as it prints, the result), with the model's text streaming in from live items until the log's
// `model.response` replaces it with the reply as recorded.

import { h, append, put, clip, shown, shownPath, ANSWER_WORDS } from "./dom.js";

/** A command's escape sequences (colours, cursor moves): shown as plain text without them. */
// eslint-disable-next-line no-control-regex
const ESCAPES = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]/g;

function plain(text) {
  return String(text ?? "").replace(ESCAPES, "");
}

/** The one argument that says what a call is about. */
function gist(tool, input) {
  if (!input || typeof input !== "object") return "";
  const first = input.command ?? input.path ?? input.pattern ?? input.url ?? input.query;
  if (first !== undefined) return String(first);
  if (tool === "update_plan" && Array.isArray(input.steps)) return `${input.steps.length} step(s)`;
  if (tool === "set_title") return String(input.title ?? "");
  return "";
}

function pre(text, cls) {
  return h("pre", { class: cls || "text" }, String(text ?? ""));
}

export class Timeline {
  /** `list`: the `<ol>` the entries go in. */
  constructor(list) {
    this.list = list;
    this.model = null;
    this.unlisten = null;
    this.cards = new Map();
    this.streams = new Map();
  }

  /** Shows `model` (everything it has, then what comes). */
  show(model) {
    if (this.unlisten) this.unlisten();
    this.model = model;
    this.cards.clear();
    this.streams.clear();
    put(this.list);
    for (const event of model.events) this.event(event);
    this.unlisten = model.listen((change) => {
      if (change.event) this.event(change.event);
      else this.live(change.live);
    });
  }

  entry(cls, ...children) {
    const li = h("li", { class: `entry ${cls}` }, ...children);
    this.list.append(li);
    this.follow(li);
    return li;
  }

  /** Keeps the newest entry in view while the reader is at the bottom. */
  follow(el) {
    const scroller = document.scrollingElement;
    const atBottom = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
    if (atBottom) el.scrollIntoView({ block: "end" });
  }

  event(e) {
    const d = e.data || {};
    switch (e.kind) {
      case "session.start":
        this.entry(
          "meta",
          h("span", { class: "who" }, "Session started"),
          ` ${d.provider ?? "?"} · ${d.model ?? "?"} · ${d.project ?? ""}`,
          d.policy_file ? ` · policy ${d.policy_file}` : "",
        ).dataset.seq = e.seq;
        break;
      case "turn.start":
        if (d.input) {
          const li = this.entry("you", h("div", { class: "who" }, "You"), pre(d.input));
          li.dataset.seq = e.seq;
        }
        break;
      case "model.response":
        this.response(e, d);
        break;
      case "model.retry":
        this.entry("note", `The model failed (attempt ${d.attempt}): ${d.reason}; asking again in ${d.wait_ms} ms`);
        break;
      case "tool.call":
        this.card(e.call_id, d.tool, d.input, d);
        break;
      case "decision":
        this.decision(e, d);
        break;
      case "approval.ask":
        this.asked(e, d);
        break;
      case "approval.answer":
        this.answered(e, d);
        break;
      case "tool.result":
        this.result(e, d);
        break;
      case "command.result":
        this.command(e, d);
        break;
      case "workspace.apply": {
        const undo = d.kind === "undo";
        const paths = (d.files || []).map((f) => shownPath(f.path)).join(", ");
        const li = this.entry("apply", h("span", { class: "who" }, undo ? "Undid apply" : "Applied"), " ",
          h("code", {}, undo ? d.undo_of ?? "" : d.apply_id), ` → ${shownPath(d.project)}: ${paths}`);
        li.dataset.applyRecord = d.apply_id;
        break;
      }
      case "session.end": {
        const s = d.summary;
        const li = this.entry(
          "meta end",
          h("span", { class: "who" }, `Session ended: ${d.reason}`),
          d.error ? ` — ${d.error}` : "",
          s ? ` · ${s.turns} turn(s), ${s.tool_calls} tool call(s), ${s.input_tokens + s.output_tokens} tokens` : "",
        );
        li.dataset.ended = d.reason;
        break;
      }
      case "note":
        this.note(d);
        break;
      case "turn.end":
        if (d.reason === "interrupted" || d.reason === "error") {
          const li = this.entry("note", h("strong", {}, `Turn ${d.turn} ${d.reason === "error" ? "failed" : "interrupted"}`));
          li.dataset.turnEnd = d.reason;
        }
        break;
      case "model.request":
        break;
      default:
        if (e.kind.startsWith("net.")) {
          this.entry("note", `${e.kind}: ${d.host ?? ""}:${d.port ?? ""} ${d.decision ?? ""} ${d.reason ?? ""}`);
        } else {
          this.entry("note", e.kind);
        }
    }
  }

  note(d) {
    switch (d.about) {
      case "task":
        this.entry("meta", h("details", {}, h("summary", {}, "The task and the system prompt the loop started from"),
          pre(d.task), pre(d.system, "output")));
        break;
      case "torn_tail":
        this.entry("note", `A torn last line (seq ${d.torn_line}, ${d.torn_bytes} bytes) was set aside in ${d.saved_to}`);
        break;
      case "checkpoint_failed":
        this.entry("note", `Checkpoint ${d.checkpoint} failed: ${d.failed}`);
        break;
      case "apply_failed":
        this.entry("note", `An apply${d.apply_id ? ` (${d.apply_id})` : ""} did not land: ${d.failed}`);
        break;
      case "ratchet":
        this.entry("note", `The agent ${d.change === "widen" ? "widened" : "restricted"} its policy: ${d.pattern} → ${d.decision}`);
        break;
      case "background_ended":
        this.entry("note", `Background command ${d.background} ended: ${d.status ?? "killed"}`);
        break;
      default:
        this.entry("note", d.text ?? `note: ${d.about ?? ""}`);
    }
  }

  response(e, d) {
    const streaming = this.streams.get(`t${d.turn}.message`);
    this.streams.delete(`t${d.turn}.message`);
    const thinking = this.streams.get(`t${d.turn}.reasoning`);
    this.streams.delete(`t${d.turn}.reasoning`);
    if (thinking) thinking.remove();
    for (const block of d.content || []) {
      if (block.type === "text" && block.text) {
        const li = h("li", { class: "entry assistant", dataset: { seq: e.seq, turn: d.turn } },
          h("div", { class: "who" }, "Model"), pre(block.text));
        if (streaming) streaming.replaceWith(li);
        else this.list.append(li);
        this.follow(li);
      } else if (block.type === "thinking" && block.thinking) {
        this.entry("thinking", h("details", {}, h("summary", {}, "Reasoning"), pre(block.thinking)));
      }
    }
    if (streaming && streaming.isConnected) streaming.remove();
  }

  card(callId, tool, input, d) {
    const status = h("span", { class: "badge status", dataset: { status: "pending" } }, "pending");
    const head = h("div", { class: "tool-head" },
      h("span", { class: "tool-name" }, tool || "call"),
      h("code", { class: "tool-arg" }, clip(gist(tool, input) || (d?.argv || []).join(" "), 160)),
      status);
    const body = h("div", { class: "tool-body" });
    if (input !== undefined) {
      body.append(h("details", { class: "tool-input" }, h("summary", {}, "Input"),
        pre(JSON.stringify(input, null, 2), "json")));
    }
    if (d?.action) body.append(h("div", { class: "line" }, `act ${d.action}`, d.resolved ? ` · ${d.resolved}` : ""));
    const li = this.entry("tool", head, body);
    li.dataset.call = callId || "";
    li.dataset.tool = tool || "";
    const card = { li, body, status, output: null, streamed: false };
    if (callId) this.cards.set(callId, card);
    return card;
  }

  cardFor(callId) {
    return (callId && this.cards.get(callId)) || null;
  }

  setStatus(card, status, words) {
    card.status.dataset.status = status;
    card.status.textContent = words || status;
    card.li.dataset.status = status;
  }

  decision(e, d) {
    const verdict = d.allowed ? "allowed" : "refused";
    const table = d.decision === (d.allowed ? "allow" : "deny") ? "" : ` (the table said ${d.decision})`;
    const line = h("div", { class: `line decision ${verdict}`, dataset: { decision: d.decision, allowed: d.allowed } },
      h("strong", {}, verdict), d.action ? [" ", h("code", {}, d.action)] : "", `${table} — ${d.decided_by}`);
    const card = this.cardFor(e.call_id);
    if (card) {
      card.body.append(line);
      if (!d.allowed) this.setStatus(card, "refused");
      else if (card.status.dataset.status === "pending") this.setStatus(card, "running");
    } else {
      this.entry("decision-entry", line);
    }
  }

  asked(e, d) {
    const box = h("div", { class: "line asked", dataset: { question: d.question ?? "" } },
      h("div", {}, h("strong", {}, `Asked ${d.asked}`), d.decided_by ? ` (${d.decided_by})` : "", ":"),
      pre(shown(d.what), "what"));
    const card = this.cardFor(e.call_id);
    if (card) {
      card.body.append(box);
      this.setStatus(card, "asking", "waiting for an answer");
    } else {
      this.entry("asked-entry", box);
    }
  }

  answered(e, d) {
    const words = ANSWER_WORDS[d.answer] ?? d.answer;
    const line = h("div", { class: "line answered", dataset: { answer: d.answer } },
      h("strong", {}, words), ` — by ${d.by ?? "nobody"}`, d.reasons ? `: ${d.reasons}` : "",
      d.reply ? h("div", {}, pre(d.reply)) : null);
    const card = this.cardFor(e.call_id);
    if (card) {
      card.body.append(line);
      this.setStatus(card, "running");
    } else {
      this.entry("answered-entry", line);
    }
  }

  result(e, d) {
    const card = this.cardFor(e.call_id) || this.card(e.call_id, d.tool, undefined, null);
    const failed = Boolean(d.is_error);
    if (card.status.dataset.status !== "refused") this.setStatus(card, failed ? "error" : "ok");
    const details = h("details", { class: `tool-result ${failed ? "error" : "ok"}` },
      h("summary", {}, failed ? "Error" : "Result", d.changed?.length ? ` · changed ${d.changed.join(", ")}` : ""),
      pre(clip(plain(d.output), 20000), "output"));
    if (failed || String(d.output ?? "").length < 400) details.open = true;
    card.body.append(details);
    card.li.dataset.result = failed ? "error" : "ok";
  }

  command(e, d) {
    const card = this.cardFor(e.call_id);
    let words;
    if (d.outcome === "ran") {
      const s = d.status || {};
      const how = s.kind === "exited" ? `exit ${s.value}` : `${s.kind ?? "ended"}${s.value !== undefined ? ` ${s.value}` : ""}`;
      words = `${how} in ${d.duration_ms} ms${d.truncated ? " (output cut)" : ""}`;
    } else if (d.outcome === "refused") {
      words = `not run: refused by ${d.by}: ${d.reason}`;
    } else {
      words = `not run: ${d.error ?? "failed"}: ${d.message ?? ""}`;
    }
    const line = h("div", { class: `line command ${d.outcome}` }, words);
    if (card) card.body.append(line);
    else this.entry("note", line);
  }

  /** A live item: text streaming, a command's output, a plan. */
  live(item) {
    switch (item.type) {
      case "text":
      case "thinking": {
        let el = this.streams.get(item.item);
        if (!el) {
          const cls = item.type === "text" ? "assistant streaming" : "thinking streaming";
          el = this.entry(cls, h("div", { class: "who" }, item.type === "text" ? "Model" : "Reasoning"), pre(""));
          el.dataset.item = item.item;
          this.streams.set(item.item, el);
        }
        el.querySelector("pre").append(document.createTextNode(item.text));
        this.follow(el);
        break;
      }
      case "item_started":
        if (item.kind?.kind === "command_output") this.output(item.kind.call_id);
        break;
      case "item_delta":
        if (item.item.endsWith(".output")) {
          const out = this.output(item.item.slice(0, -".output".length));
          if (out) {
            out.append(document.createTextNode(plain(item.text)));
            out.scrollTop = out.scrollHeight;
          }
        }
        break;
      default:
        break;
    }
  }

  /** The live output box of a call's card (made on first use). */
  output(callId) {
    const card = this.cardFor(callId);
    if (!card) return null;
    if (!card.output) {
      card.output = h("pre", { class: "live-output", aria: { label: "command output" } });
      card.body.append(h("div", { class: "line" }, "Output"), card.output);
    }
    return card.output;
  }
}

/** Renders the plan's steps into `list`. */
export function renderPlan(list, steps) {
  put(list, steps.map((s) =>
    h("li", { class: `step ${s.status}`, dataset: { status: s.status } },
      h("span", { class: "mark", aria: { hidden: "true" } }, s.status === "done" ? "✓" : s.status === "in_progress" ? "▸" : "○"),
      " ", s.step)));
  if (!steps.length) append(list, h("li", { class: "empty" }, "No plan yet."));
}
