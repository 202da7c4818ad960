// The daemon's protocol on the WebSocket at /ws: JSON-RPC requests with promises for their
// responses, notifications handed to the page, and a reconnect that tells the page when it is
// back so it can resubscribe from the last seq it saw (the log is the source; nothing is lost).

/** A failed call: the daemon's typed error (`kind` is what code branches on). */
export class RpcFailure extends Error {
  constructor(kind, message, code) {
    super(message);
    this.kind = kind;
    this.code = code;
  }
}

const RETRY_MS = [250, 500, 1000, 2000, 4000, 5000];

/** Where the daemon's token is kept: this origin's storage, which no other port can read. */
const TOKEN_KEY = "chock.token";

/** The daemon's token, or "" before a login. */
function storedToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

/**
 * Trades the one-time code of a login link (`#login=CODE`) for the daemon's token and keeps it;
 * the code leaves the address bar and the history first. Resolves with "" (signed in, or no link
 * to redeem) or with why the daemon refused the code. No cookie is ever set: a browser sends a
 * host's cookies to every port of it, so another server on 127.0.0.1 would receive one.
 */
export async function redeemLoginLink() {
  const m = /^#login=([0-9a-f]+)$/.exec(location.hash);
  if (!m) return "";
  history.replaceState(null, "", location.pathname + location.search);
  try {
    const r = await fetch("/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Chock": "1" },
      body: JSON.stringify({ once: m[1] }),
      credentials: "omit",
    });
    const body = await r.json().catch(() => null);
    if (r.ok && typeof body?.token === "string") {
      localStorage.setItem(TOKEN_KEY, body.token);
      return "";
    }
    return body?.error?.message || "the daemon refused this login link";
  } catch {
    return "the daemon could not be reached to sign in";
  }
}

export class Connection {
  /**
   * `onNotice(method, params)` gets every notification; `onStatus(state, why)` every change of
   * the link (`connecting`, `open`, `closed`, `forbidden`); `onOpen()` runs on each (re)connect.
   */
  constructor({ onNotice, onStatus, onOpen }) {
    this.onNotice = onNotice;
    this.onStatus = onStatus;
    this.onOpen = onOpen;
    this.ws = null;
    this.nextId = 1;
    this.waiting = new Map();
    this.attempt = 0;
    this.timer = null;
  }

  get open() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  connect() {
    clearTimeout(this.timer);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    // A browser cannot set headers on a WebSocket: the token rides as a subprotocol.
    const token = storedToken();
    const protocols = token ? ["chock.v1", `bearer.${token}`] : ["chock.v1"];
    const ws = new WebSocket(`${scheme}://${location.host}/ws`, protocols);
    this.ws = ws;
    let opened = false;
    this.onStatus("connecting", "");
    ws.addEventListener("open", () => {
      opened = true;
      this.attempt = 0;
      this.onStatus("open", "");
      this.onOpen();
    });
    ws.addEventListener("message", (e) => this.take(e.data));
    ws.addEventListener("close", () => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const { reject } of this.waiting.values()) {
        reject(new RpcFailure("disconnected", "the connection to the daemon was lost"));
      }
      this.waiting.clear();
      const wait = RETRY_MS[Math.min(this.attempt, RETRY_MS.length - 1)];
      this.attempt += 1;
      if (opened) {
        this.onStatus("closed", `reconnecting in ${wait / 1000}s`);
        this.timer = setTimeout(() => this.connect(), wait);
      } else {
        // The upgrade was refused or never answered: ask /rpc why (a 403 says it in its body).
        this.diagnose().then((why) => {
          this.onStatus(why ? "forbidden" : "closed", why || `reconnecting in ${wait / 1000}s`);
          this.timer = setTimeout(() => this.connect(), why ? 5000 : wait);
        });
      }
    });
  }

  /** Why the daemon refuses this page, or "" when it does not (or cannot be reached). */
  async diagnose() {
    try {
      const r = await fetch("/rpc", {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "X-Chock": "1",
          Authorization: `Bearer ${storedToken()}`,
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "sessions.list", params: {} }),
        credentials: "omit",
      });
      if (r.status !== 403) return "";
      const body = await r.json().catch(() => null);
      return body?.error?.message || "the daemon refused this page";
    } catch {
      return "";
    }
  }

  take(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (frame.id !== undefined && frame.id !== null && this.waiting.has(frame.id)) {
      const { resolve, reject } = this.waiting.get(frame.id);
      this.waiting.delete(frame.id);
      if (frame.error) {
        const kind = frame.error.data?.kind || "internal";
        reject(new RpcFailure(kind, frame.error.message, frame.error.code));
      } else {
        resolve(frame.result);
      }
    } else if (frame.method) {
      this.onNotice(frame.method, frame.params || {});
    } else if (frame.error) {
      this.onNotice("client.error", frame.error);
    }
  }

  /** Sends `method` with `params`; resolves with its result, rejects with an `RpcFailure`. */
  call(method, params = {}) {
    if (!this.open) {
      return Promise.reject(new RpcFailure("disconnected", "not connected to the daemon"));
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    });
  }
}
