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
    const ws = new WebSocket(`${scheme}://${location.host}/ws`);
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
        headers: { "Content-Type": "application/json", "X-Chock": "1" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 0, method: "sessions.list", params: {} }),
        credentials: "same-origin",
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
