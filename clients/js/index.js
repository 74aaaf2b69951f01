// SPDX-License-Identifier: Apache-2.0
// A client for airlockd's HTTP API (docs/api.md): Node 18 or later, nothing
// but Node's own modules. Over the daemon's unix socket (the default) or TCP.
//
//   import { Client } from "./index.js";
//   const c = new Client({ token: process.env.AIRLOCK_TOKEN });
//   const sb = await c.create({ class: "small" });
//   const term = await c.pty.create(sb.id, { rows: 24, cols: 80,
//     onData: (bytes) => process.stdout.write(bytes) });
//   await term.sendInput("echo hi\r");
//   await c.pty.resize(sb.id, term.pid, { rows: 40, cols: 120 });
//   await c.pty.kill(sb.id, term.pid);

import crypto from "node:crypto";
import http from "node:http";
import path from "node:path";

/** An answer of 400 or above: its status and the API's {error, message} body. */
export class AirlockError extends Error {
  /** @param {number} status @param {any} body */
  constructor(status, body) {
    const b = body && typeof body === "object" ? body : {};
    super(`${status} ${b.error || "http_" + status}: ${b.message || ""}`);
    this.status = status;
    this.body = b;
    this.error = b.error || "http_" + status;
  }
}

/** The socket airlockd listens on by default for this user. */
export function defaultSocket() {
  if (process.env.AIRLOCK_SOCKET) return process.env.AIRLOCK_SOCKET;
  if (process.getuid && process.getuid() === 0) return "/run/airlock/airlockd.sock";
  const xdg = process.env.XDG_RUNTIME_DIR;
  return xdg ? path.join(xdg, "airlock", "airlockd.sock") : undefined;
}

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/**
 * @typedef {object} ClientOptions
 * @property {string} [socketPath] the daemon's unix socket
 * @property {string} [url] e.g. "http://127.0.0.1:7070" (instead of the socket)
 * @property {string} [token] a grant's token (default $AIRLOCK_TOKEN)
 */

export class Client {
  /** @param {ClientOptions} [opts] */
  constructor(opts = {}) {
    this.url = opts.url || (opts.socketPath ? undefined : process.env.AIRLOCK_URL);
    this.socketPath = opts.socketPath || (this.url ? undefined : defaultSocket());
    this.token = opts.token ?? process.env.AIRLOCK_TOKEN;
    if (!this.url && !this.socketPath) throw new Error("no socket: give socketPath or url");
    /** Terminals: create, connect, sendInput, resize, kill. */
    this.pty = new Pty(this);
  }

  /** @param {Record<string,string>} [extra] */
  _options(method, p, extra = {}) {
    const headers = { ...extra };
    if (this.token) headers.Authorization = "Bearer " + this.token;
    if (this.url) {
      const u = new URL(this.url);
      return { method, host: u.hostname, port: u.port || 80, path: p, headers };
    }
    return { method, socketPath: this.socketPath, path: p, headers };
  }

  /**
   * One request; resolves to {status, headers, body (Buffer)} whatever the status.
   * @param {string} method @param {string} p @param {any} [body]
   */
  request(method, p, body) {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const opts = this._options(method, p, data ? { "Content-Type": "application/json", "Content-Length": String(data.length) } : {});
      const req = http.request(opts, (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(data);
    });
  }

  async _json(method, p, body, expect = [200, 201]) {
    const r = await this.request(method, p, body);
    let doc = {};
    try { doc = r.body.length ? JSON.parse(r.body.toString()) : {}; } catch { doc = { error: "bad_response" }; }
    if (!expect.includes(r.status)) throw new AirlockError(r.status, doc);
    return doc;
  }

  /** @param {{class?: string, policy?: object, metadata?: object, ttl?: number}} [opts] */
  create(opts = {}) { return this._json("POST", "/v1/sandboxes", opts); }
  /** @param {string} id */
  get(id) { return this._json("GET", `/v1/sandboxes/${id}`); }
  /** @param {string} id */
  delete(id) { return this._json("DELETE", `/v1/sandboxes/${id}`); }

  /**
   * Start an agent run (docs/agent.md); resolves to {id, state}.
   * @param {{task: string, model: string, policy: object, provider?: string, modelRoute?: string,
   *          maxTurns?: number, maxTokens?: number, timeout?: number, stream?: boolean}} opts
   */
  createRun(opts) { return this._json("POST", "/v1/runs", opts, [202]); }
  /** @param {string} id resolves to {id, state, result, transcript} */
  getRun(id) { return this._json("GET", `/v1/runs/${id}`); }
  /**
   * The run's transcript as it happens: onEvent("transcript", entry) for each
   * entry, then onEvent("result", result); resolves to the result.
   * @param {string} id @param {(name: string, data: any) => void} onEvent
   */
  runEvents(id, onEvent) {
    return new Promise((resolve, reject) => {
      const req = http.request(this._options("GET", `/v1/runs/${id}/events`), (res) => {
        const chunks = [];
        let buf = "", result = null;
        res.setEncoding("utf8");
        res.on("data", (c) => {
          if (res.statusCode !== 200) { chunks.push(c); return; }
          buf += c;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let name = "message";
            const data = [];
            for (const line of block.split("\n")) {
              if (line.startsWith("event:")) name = line.slice(6).trim();
              else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
            }
            if (!data.length) continue;
            const doc = JSON.parse(data.join("\n"));
            if (name === "result") result = doc;
            onEvent(name, doc);
          }
        });
        res.on("end", () => {
          if (res.statusCode !== 200) {
            let doc = {};
            try { doc = JSON.parse(chunks.join("")); } catch { doc = { error: "bad_response" }; }
            reject(new AirlockError(res.statusCode, doc));
          } else resolve(result);
        });
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });
  }

  /** Poll until the run is done. @param {string} id @param {number} [timeoutMs] */
  async waitRun(id, timeoutMs = 600000) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const r = await this.getRun(id);
      if (r.state === "done" || Date.now() > end) return r;
      await new Promise((res) => setTimeout(res, 500));
    }
  }

  /**
   * Start a command in the background; resolves to its pid.
   * @param {string} id @param {string[]} argv
   * @param {{env?: Record<string,string>, cwd?: string, timeout?: number, pty?: {rows: number, cols: number}}} [opts]
   */
  async execBackground(id, argv, opts = {}) {
    const body = { argv, background: true };
    if (opts.env) body.env = opts.env;
    if (opts.cwd) body.cwd = opts.cwd;
    if (opts.timeout) body.timeout = opts.timeout;
    if (opts.pty) body.pty = opts.pty;
    return (await this._json("POST", `/v1/sandboxes/${id}/exec`, body, [201])).pid;
  }

  /** @param {string} id @param {number} pid @param {string|Uint8Array} data */
  stdin(id, pid, data) {
    const b = typeof data === "string" ? Buffer.from(data) : Buffer.from(data);
    return this._json("POST", `/v1/sandboxes/${id}/processes/${pid}/stdin`, { data: b.toString("base64"), eof: false });
  }

  /** @param {string} id @param {number} pid @param {string|number} sig */
  signal(id, pid, sig = "TERM") {
    return this._json("POST", `/v1/sandboxes/${id}/processes/${pid}/signal`, { signal: sig });
  }
}

/**
 * @typedef {object} PtyEvents
 * @property {(data: Uint8Array) => void} [onData] the terminal's output
 * @property {(exit: {exitCode: number, signal: number|null, errorCode: string|null}) => void} [onExit]
 * @property {number} [offset] output bytes already received (to resume)
 */

/** A connected terminal: its output goes to onData; `offset` counts it. */
export class PtyHandle {
  constructor(client, sandboxId, pid, socket, head, ev) {
    this.client = client;
    this.sandboxId = sandboxId;
    /** @type {number} */ this.pid = pid;
    /** Output bytes received since the process started: reconnect with it. */
    this.offset = ev.offset || 0;
    /** The exit event once the process ended. @type {any} */ this.exit = null;
    /** The close code the server sent, once closed. @type {number|null} */ this.closeCode = null;
    this._sock = socket;
    this._buf = Buffer.alloc(0);
    this._ev = ev;
    this._closed = false;
    this._done = new Promise((resolve) => { this._resolve = resolve; });
    socket.on("data", (d) => this._onData(d));
    socket.on("close", () => this._finish());
    socket.on("error", () => this._finish());
    if (head && head.length) this._onData(head);
  }

  _finish() {
    if (this._closed) return;
    this._closed = true;
    this._resolve(this.exit);
  }

  _onData(d) {
    this._buf = Buffer.concat([this._buf, d]);
    for (;;) {
      if (this._buf.length < 2) return;
      const op = this._buf[0] & 0x0f;
      let n = this._buf[1] & 0x7f, hl = 2;
      if (n === 126) { if (this._buf.length < 4) return; n = this._buf.readUInt16BE(2); hl = 4; }
      else if (n === 127) { if (this._buf.length < 10) return; n = Number(this._buf.readBigUInt64BE(2)); hl = 10; }
      if (this._buf.length < hl + n) return;
      const payload = this._buf.subarray(hl, hl + n);
      this._buf = this._buf.subarray(hl + n);
      if (op === 0x2) {
        this.offset += payload.length;
        if (this._ev.onData) this._ev.onData(new Uint8Array(payload));
      } else if (op === 0x1) {
        const e = JSON.parse(payload.toString());
        if (e.type === "exit") { this.exit = e; if (this._ev.onExit) this._ev.onExit(e); }
        else if (e.type === "gap") this.offset = e.to;
      } else if (op === 0x9) {
        this._send(0xa, payload);
      } else if (op === 0x8) {
        this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        this._send(0x8, payload.subarray(0, 2));
        this._sock.end();
        this._finish();
      }
    }
  }

  _send(op, payload) {
    if (this._sock.destroyed) return;
    const mask = crypto.randomBytes(4);
    const n = payload.length;
    let head;
    if (n < 126) head = Buffer.from([0x80 | op, 0x80 | n]);
    else if (n < 65536) { head = Buffer.alloc(4); head[0] = 0x80 | op; head[1] = 0x80 | 126; head.writeUInt16BE(n, 2); }
    else { head = Buffer.alloc(10); head[0] = 0x80 | op; head[1] = 0x80 | 127; head.writeBigUInt64BE(BigInt(n), 2); }
    const body = Buffer.alloc(n);
    for (let i = 0; i < n; i++) body[i] = payload[i] ^ mask[i & 3];
    this._sock.write(Buffer.concat([head, mask, body]));
  }

  /** Type into the terminal. @param {string|Uint8Array} data */
  async sendInput(data) {
    const b = typeof data === "string" ? Buffer.from(data) : Buffer.from(data);
    for (let i = 0; i < b.length; i += 32 * 1024) this._send(0x2, b.subarray(i, i + 32 * 1024));
  }

  /** Resolves to the exit event (null if the stream ended without one). */
  wait() { return this._done; }

  /** Leave the terminal; the process runs on. */
  async disconnect() {
    if (this._closed) return;
    const code = Buffer.alloc(2);
    code.writeUInt16BE(1000, 0);
    this._send(0x8, code);
    this._sock.end();
    this._finish();
  }
}

/** client.pty, modelled on the usual sandbox SDKs' terminal API. */
export class Pty {
  constructor(client) { this.client = client; }

  /**
   * Start a process on a new terminal; connect to it when onData is given.
   * @param {string} sandboxId
   * @param {{rows?: number, cols?: number, cmd?: string[], envs?: Record<string,string>, cwd?: string, timeout?: number} & PtyEvents} [opts]
   * @returns {Promise<PtyHandle|{pid: number}>}
   */
  async create(sandboxId, opts = {}) {
    const pid = await this.client.execBackground(sandboxId, opts.cmd || ["/bin/bash", "-i"], {
      env: opts.envs, cwd: opts.cwd, timeout: opts.timeout,
      pty: { rows: opts.rows || 24, cols: opts.cols || 80 },
    });
    if (!opts.onData && !opts.onExit) return { pid };
    return this.connect(sandboxId, pid, opts);
  }

  /**
   * The terminal's stream (a WebSocket), from output byte `offset` on.
   * @param {string} sandboxId @param {number} pid @param {PtyEvents} [ev]
   * @returns {Promise<PtyHandle>}
   */
  connect(sandboxId, pid, ev = {}) {
    const c = this.client;
    const key = crypto.randomBytes(16).toString("base64");
    const p = `/v1/sandboxes/${sandboxId}/processes/${pid}/pty?offset=${ev.offset || 0}`;
    const opts = c._options("GET", p, {
      Connection: "Upgrade", Upgrade: "websocket",
      "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": key,
    });
    return new Promise((resolve, reject) => {
      const req = http.request(opts);
      req.on("upgrade", (res, socket, head) => {
        const want = crypto.createHash("sha1").update(key + WS_GUID).digest("base64");
        if (res.headers["sec-websocket-accept"] !== want) {
          socket.destroy();
          reject(new Error("bad Sec-WebSocket-Accept from airlockd"));
          return;
        }
        resolve(new PtyHandle(c, sandboxId, pid, socket, head, ev));
      });
      req.on("response", (res) => {
        const chunks = [];
        res.on("data", (d) => chunks.push(d));
        res.on("end", () => {
          let doc = {};
          try { doc = JSON.parse(Buffer.concat(chunks).toString()); } catch { /* not JSON */ }
          reject(new AirlockError(res.statusCode, doc));
        });
      });
      req.on("error", reject);
      req.end();
    });
  }

  /** Type into a terminal without a stream. @param {string} sandboxId @param {number} pid @param {string|Uint8Array} data */
  sendInput(sandboxId, pid, data) { return this.client.stdin(sandboxId, pid, data); }

  /** @param {string} sandboxId @param {number} pid @param {{rows: number, cols: number}} size */
  resize(sandboxId, pid, size) {
    return this.client._json("POST", `/v1/sandboxes/${sandboxId}/processes/${pid}/resize`, { rows: size.rows, cols: size.cols });
  }

  /** @param {string} sandboxId @param {number} pid */
  kill(sandboxId, pid) { return this.client.signal(sandboxId, pid, "KILL"); }
}
