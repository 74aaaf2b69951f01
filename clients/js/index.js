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

  /** @param {string} id resolves to the running sandbox's effective capabilities */
  capabilities(id) { return this._json("GET", `/v1/sandboxes/${id}/capabilities`); }
  /**
   * Grant and revoke entries at once (all or none); resolves to the new set.
   * @param {string} id @param {{grant?: object[], revoke?: object[]}} change
   */
  changeCapabilities(id, change = {}) {
    const body = {};
    if (change.grant) body.grant = change.grant;
    if (change.revoke) body.revoke = change.revoke;
    return this._json("POST", `/v1/sandboxes/${id}/capabilities`, body);
  }
  /** @param {string} id @param {...object} entries */
  grantCapabilities(id, ...entries) { return this.changeCapabilities(id, { grant: entries }); }
  /** @param {string} id @param {...object} entries */
  revokeCapabilities(id, ...entries) { return this.changeCapabilities(id, { revoke: entries }); }
  /** @param {string} [sandboxId] resolves to the pending approvals, oldest first */
  async approvals(sandboxId) {
    const q = sandboxId ? `?sandbox=${encodeURIComponent(sandboxId)}` : "";
    return (await this._json("GET", `/v1/approvals${q}`)).approvals;
  }
  /**
   * @param {string} approvalId
   * @param {"allow-once"|"allow-sandbox"|"deny"|"deny-sandbox"} decision
   */
  decideApproval(approvalId, decision) {
    return this._json("POST", `/v1/approvals/${encodeURIComponent(approvalId)}`, { decision });
  }
  /** @param {string} id the hardware's emergency stop: resolves to {sandbox, stopped, driverTold, receivedAt} */
  estop(id) { return this._json("POST", `/v1/sandboxes/${id}/estop`, {}); }

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

  /**
   * A request whose body is bytes (or nothing) and whose answer is read as a
   * stream: resolves to the response once its status is known; an answer of
   * 400 or above is read whole and thrown as AirlockError.
   * @param {string} method @param {string} p @param {Buffer} [raw] @param {string} [type]
   */
  _open(method, p, raw, type = "application/octet-stream") {
    return new Promise((resolve, reject) => {
      const extra = raw === undefined ? {} : { "Content-Type": type, "Content-Length": String(raw.length) };
      const req = http.request(this._options(method, p, extra), (res) => {
        if (res.statusCode < 400) { resolve(res); return; }
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => {
          let doc = {};
          try { doc = JSON.parse(Buffer.concat(chunks).toString()); } catch { /* not JSON */ }
          reject(new AirlockError(res.statusCode, doc));
        });
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(raw);
    });
  }

  /** The whole body of a byte answer. */
  async _bytes(method, p, raw, type) {
    const res = await this._open(method, p, raw, type);
    const chunks = [];
    for await (const c of res) chunks.push(c);
    return Buffer.concat(chunks);
  }

  /** JSON lines as they come (exec and watch streams). */
  async *_lines(method, p, body) {
    const raw = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const res = await this._open(method, p, raw, "application/json");
    let buf = "";
    for await (const c of res) {
      buf += c.toString();
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) yield JSON.parse(line);
      }
    }
    if (buf.trim()) yield JSON.parse(buf);
  }

  // sandboxes

  /** @param {{state?: string, metadata?: Record<string,string>, limit?: number}} [opts] */
  async list(opts = {}) {
    return (await this._json("GET", "/v1/sandboxes" + query({ state: opts.state, limit: opts.limit, ...prefixed("metadata.", opts.metadata) }))).sandboxes;
  }
  /** @param {string} id @param {number} ttl seconds */
  setTtl(id, ttl) { return this._json("POST", `/v1/sandboxes/${id}/ttl`, { ttl }); }

  // processes

  /**
   * Run a command and yield its events as they come: started, stdout and
   * stderr (with `data` as a Buffer), error, exit.
   * @param {string} id @param {string[]} argv
   * @param {{env?: Record<string,string>, cwd?: string, stdin?: string|Uint8Array, timeout?: number, uid?: number}} [opts]
   */
  async *exec(id, argv, opts = {}) {
    const body = { argv };
    for (const k of ["env", "cwd", "timeout", "uid"]) if (opts[k] !== undefined) body[k] = opts[k];
    if (opts.stdin !== undefined) body.stdin = Buffer.from(opts.stdin).toString("base64");
    for await (const ev of this._lines("POST", `/v1/sandboxes/${id}/exec`, body)) yield decodeData(ev);
  }

  /** exec() to the end: {pid, exitCode, signal, errorCode, stdout, stderr, events}. */
  async run(id, argv, opts = {}) {
    const r = { pid: null, exitCode: null, signal: null, errorCode: null, stdout: Buffer.alloc(0), stderr: Buffer.alloc(0), events: [] };
    for await (const ev of this.exec(id, argv, opts)) {
      r.events.push(ev);
      if (ev.type === "started") r.pid = ev.pid;
      else if (ev.type === "stdout") r.stdout = Buffer.concat([r.stdout, ev.data]);
      else if (ev.type === "stderr") r.stderr = Buffer.concat([r.stderr, ev.data]);
      else if (ev.type === "exit") Object.assign(r, { pid: ev.pid ?? r.pid, exitCode: ev.exitCode, signal: ev.signal ?? null, errorCode: ev.errorCode ?? null });
    }
    return r;
  }

  /** A background process's events: what was kept, then as they come. */
  async *events(id, pid) {
    for await (const ev of this._lines("GET", `/v1/sandboxes/${id}/processes/${pid}/events`)) yield decodeData(ev);
  }
  /** @param {string} id */
  async processes(id) { return (await this._json("GET", `/v1/sandboxes/${id}/processes`)).processes; }

  // files (paths inside the workspace)

  _files(id, suffix, params) { return `/v1/sandboxes/${id}/files${suffix}` + query(params); }
  /** @param {string} id @param {string} p @returns {Promise<Buffer>} */
  readFile(id, p) { return this._bytes("GET", this._files(id, "", { path: p })); }
  /**
   * Write bytes or a string. More than one request's worth (8 MiB pieces;
   * the daemon takes 16 MiB a request) goes to a hidden sibling piece by
   * piece and is then renamed into place, so readers see the old file or
   * the whole new one.
   * @param {string} id @param {string} p @param {string|Uint8Array} data @param {{parents?: boolean}} [opts]
   */
  async writeFile(id, p, data, opts = {}) {
    const b = Buffer.from(data);
    const parents = opts.parents === false ? "false" : "true";
    const put = async (path, piece, extra) => JSON.parse((await this._bytes("PUT", this._files(id, "", { path, ...extra }), piece)).toString() || "{}");
    if (b.length <= WRITE_PIECE) return put(p, b, { parents });
    const slash = p.replace(/\/+$/, "").lastIndexOf("/");
    const tmp = (slash >= 0 ? p.slice(0, slash + 1) : "") + ".airlock-upload-" + crypto.randomBytes(6).toString("hex");
    try {
      await put(tmp, b.subarray(0, WRITE_PIECE), { parents });
      for (let i = WRITE_PIECE; i < b.length; i += WRITE_PIECE) await put(tmp, b.subarray(i, i + WRITE_PIECE), { append: "true" });
      await this.rename(id, tmp, p, { overwrite: true });
    } catch (e) {
      await this.deleteFile(id, tmp).catch(() => {});
      throw e;
    }
    return { path: p, size: b.length };
  }
  /** @param {string} id @param {string} p @param {{recursive?: boolean}} [opts] */
  deleteFile(id, p, opts = {}) { return this._json("DELETE", this._files(id, "", { path: p, recursive: opts.recursive ? "true" : undefined })); }
  /** @param {string} id @param {string} [p] @param {{depth?: number}} [opts] */
  listFiles(id, p = ".", opts = {}) { return this._json("GET", this._files(id, "/list", { path: p, depth: opts.depth })); }
  /** @param {string} id @param {string} p @param {{parents?: boolean}} [opts] */
  mkdir(id, p, opts = {}) { return this._json("POST", this._files(id, "/mkdir", { path: p, parents: opts.parents ? "true" : undefined })); }
  /** @param {string} id @param {string} from @param {string} to @param {{overwrite?: boolean}} [opts] */
  rename(id, from, to, opts = {}) { return this._json("POST", `/v1/sandboxes/${id}/files/rename`, { from, to, overwrite: !!opts.overwrite }); }
  /** @param {string} id @param {string} p */
  stat(id, p) { return this._json("GET", this._files(id, "/stat", { path: p })); }
  /** @param {string} id @param {string} p */
  async exists(id, p) { return (await this._json("GET", this._files(id, "/exists", { path: p }))).exists; }
  /** A tar archive (at most 16 MiB a call) extracted beneath directory `p`. */
  async uploadTar(id, p, tar) {
    return JSON.parse((await this._bytes("PUT", this._files(id, "/tar", { path: p }), Buffer.from(tar), "application/x-tar")).toString());
  }
  /** Directory `p` of the workspace as a tar (a Buffer). */
  downloadTar(id, p = ".") { return this._bytes("GET", this._files(id, "/tar", { path: p })); }
  /**
   * A directory's events as they come: {type: "ready"} first, then create,
   * modify, delete, rename (with `from`), overflow, and {type: "end"}.
   * @param {string} id @param {string} [p] @param {{recursive?: boolean, timeout?: number}} [opts]
   */
  watch(id, p = ".", opts = {}) {
    return this._lines("GET", this._files(id, "/watch", { path: p, recursive: opts.recursive === false ? "false" : "true", timeout: opts.timeout }));
  }

  // ports

  /** Serve the sandbox's 127.0.0.1:port on the host; the answer's hostPort is where. */
  openPort(id, port, opts = {}) {
    const body = { port };
    if (opts.hostPort !== undefined) body.hostPort = opts.hostPort;
    if (opts.bind !== undefined) body.bind = opts.bind;
    return this._json("POST", `/v1/sandboxes/${id}/ports`, body, [201]);
  }
  async ports(id) { return (await this._json("GET", `/v1/sandboxes/${id}/ports`)).ports; }
  closePort(id, port) { return this._json("DELETE", `/v1/sandboxes/${id}/ports/${port}`); }

  // volumes

  async volumes() { return (await this._json("GET", "/v1/volumes")).volumes; }
  /** @param {string} name @param {number|string} size bytes, or e.g. "1G" */
  createVolume(name, size) { return this._json("POST", "/v1/volumes", { name, size }, [201]); }
  getVolume(name) { return this._json("GET", `/v1/volumes/${encodeURIComponent(name)}`); }
  deleteVolume(name) { return this._json("DELETE", `/v1/volumes/${encodeURIComponent(name)}`); }

  // review and git

  /** The unified diff of a review sandbox's changes (a Buffer). */
  diff(id) { return this._bytes("GET", `/v1/sandboxes/${id}/diff`); }
  /** @param {string} id @param {string[]} [paths] only these files */
  accept(id, paths) { return this._json("POST", `/v1/sandboxes/${id}/accept`, paths && paths.length ? { paths } : {}); }
  /** @param {string} id @param {string[]} [paths] only these files; the rest stays pending */
  discard(id, paths) { return this._json("POST", `/v1/sandboxes/${id}/discard`, paths && paths.length ? { paths } : {}); }
  /** The agent's new commits as an mbox of patches (a Buffer). */
  export(id) { return this._bytes("POST", `/v1/sandboxes/${id}/export`, Buffer.from("{}"), "application/json"); }
  /** @param {string} id @param {string} branch @param {{force?: boolean, openPr?: boolean}} [opts] */
  push(id, branch, opts = {}) {
    const body = { branch };
    if (opts.force) body.force = true;
    if (opts.openPr) body.openPr = true;
    return this._json("POST", `/v1/sandboxes/${id}/push`, body);
  }

  // the rest

  /** The sandbox's audit lines, parsed. */
  async audit(id) {
    return (await this._bytes("GET", `/v1/sandboxes/${id}/audit`)).toString().split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  }
  /** The host tools the sandbox may call: [{name, description, inputSchema}]. */
  async tools(id) { return (await this._json("GET", `/v1/sandboxes/${id}/tools`)).tools; }
  health() { return this._json("GET", "/healthz", undefined, [200, 503]); }
  async metrics() { return (await this._bytes("GET", "/metrics")).toString(); }
}

/** One request carries at most this much of a file (the daemon's body limit is 16 MiB). */
const WRITE_PIECE = 8 << 20;

/** "?k=v&..." of the defined values, percent-encoded; "" when none. */
function query(params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.append(k, String(v));
  const s = q.toString();
  return s ? "?" + s : "";
}

function prefixed(prefix, obj = {}) {
  return Object.fromEntries(Object.entries(obj || {}).map(([k, v]) => [prefix + k, v]));
}

function decodeData(ev) {
  if ((ev.type === "stdout" || ev.type === "stderr") && typeof ev.data === "string") ev.data = Buffer.from(ev.data, "base64");
  return ev;
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
