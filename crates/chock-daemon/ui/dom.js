// Building the page without ever parsing a string as HTML: every piece of text a model, a tool,
// a command or a log wrote goes in as a text node, so none of it can become markup or script.

/** Attributes `h` sets; anything else (an `on…` handler, `style`, a frame's document) is refused. */
const ATTRIBUTES = new Set([
  "id", "class", "type", "name", "value", "for", "title", "role", "href", "rel",
  "placeholder", "rows", "cols", "autocomplete", "spellcheck", "tabindex", "open",
  "disabled", "checked", "hidden", "required", "list", "datetime", "colspan",
]);

/**
 * An element: `h("button", {class: "x", dataset: {answer: "deny"}, onclick: f}, "No")`.
 * Children are nodes or strings (strings become text nodes); null and false are skipped.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "dataset") {
      for (const [k, v] of Object.entries(value)) {
        if (v !== null && v !== undefined) el.dataset[k] = String(v);
      }
    } else if (key === "aria") {
      for (const [k, v] of Object.entries(value)) {
        if (v !== null && v !== undefined) el.setAttribute(`aria-${k}`, String(v));
      }
    } else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "href" && !String(value).startsWith("#")) {
      throw new Error("h: only in-page links (#…) are made");
    } else if (ATTRIBUTES.has(key)) {
      if (value === true) el.setAttribute(key, "");
      else el.setAttribute(key, String(value));
    } else {
      throw new Error(`h: attribute ${key} is not allowed`);
    }
  }
  append(el, children);
  return el;
}

/** Appends children (a node, a string, or arrays of them) to `el`. */
export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Empties `el` and puts `children` in it. */
export function put(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** The element with this id (it must exist: the page is ours). */
export function byId(id) {
  const el = document.getElementById(id);
  if (!el) throw new Error(`no element #${id}`);
  return el;
}

/** US dollars, or an em dash when the price is unknown. */
export function money(usd) {
  if (usd === null || usd === undefined) return "—";
  if (usd === 0) return "$0.00";
  return usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/** A log timestamp as the local time of day (the date too when it is not today). */
export function when(ts) {
  if (!ts) return "";
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  const today = new Date();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
  return d.toDateString() === today.toDateString() ? time : `${d.toLocaleDateString()} ${time}`;
}

/** The last path component, for a compact project name. */
export function basename(path) {
  if (!path) return "";
  const parts = String(path).split("/").filter(Boolean);
  return parts.length ? parts[parts.length - 1] : "/";
}

/** A provider's name, short: `script:/a/b/rec.toml` is `script:rec.toml`. */
export function providerName(p) {
  if (!p) return "?";
  return p.startsWith("script:") ? `script:${basename(p.slice(7))}` : p;
}

/** At most `n` characters, with an ellipsis when cut. */
export function clip(text, n) {
  const s = String(text ?? "");
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}

/** A short form of a long id or hash. */
export function short(id, n = 12) {
  return String(id ?? "").slice(0, n);
}

/** Words for an answer kind, as the buttons say them. */
export const ANSWER_WORDS = {
  allow_once: "Yes, once",
  allow_session: "Yes, for this session",
  deny: "No",
  reply: "Reply",
  none: "Nobody answered",
};

/** A status badge for a session state. */
export function stateBadge(state) {
  return h("span", { class: `badge state-${state}`, dataset: { state } }, state);
}

/**
 * Text from outside (a model, a command, a server, a workspace path) as it is shown: every
 * control, bidi control and invisible character written as a visible `\u{…}` escape, so
 * `harmless\u{202e}txt.exe` cannot reorder itself and a line reads as it is applied. `keep` names
 * what the text may keep of its own layout (newlines by default; a diff line keeps its tabs too).
 * The class is chock-protocol's `text::ESCAPED`; a test in crates/chock-daemon/src/ui.rs holds
 * the two equal.
 */
export const ESCAPED = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/gu;

export function shown(text, keep = "\n") {
  return String(text ?? "").replace(ESCAPED, (c) => {
    if (keep.includes(c)) return c;
    if (c === "\n") return "\\n";
    if (c === "\t") return "\\t";
    if (c === "\r") return "\\r";
    return `\\u{${c.codePointAt(0).toString(16)}}`;
  });
}

/** A path as a line shows it: nothing kept (a newline in a name is shown as `\n`). */
export function shownPath(path) {
  return shown(path, "");
}
