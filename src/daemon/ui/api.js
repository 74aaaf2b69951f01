// SPDX-License-Identifier: Apache-2.0
// The dashboard's one way to the API: the session cookie goes with every
// request (the browser holds it, HttpOnly); state changes carry the
// session's CSRF token in a header. No token is ever kept in storage.

let csrf = null;

export function setCsrf(token) {
  csrf = token;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function raise(r) {
  const text = await r.text();
  let j = {};
  try {
    j = JSON.parse(text);
  } catch (e) {
    // not JSON: the text is the message
  }
  throw new ApiError(r.status, j.error || "error", j.message || text || r.statusText);
}

export async function request(method, path, body, { text = false } = {}) {
  const headers = {};
  if (method !== "GET") headers["X-Airlock-CSRF"] = csrf || "";
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) await raise(r);
  const t = await r.text();
  if (text) return t;
  return t ? JSON.parse(t) : null;
}

export const get = (p, o) => request("GET", p, undefined, o);
export const post = (p, b) => request("POST", p, b === undefined ? {} : b);
export const del = (p) => request("DELETE", p);

// Whether the daemon serves a route: an unknown path is a 404 "no such
// endpoint"; a known one answers anything else (a 405 for a POST-only one).
// Only GET is ever sent to find out, so nothing is changed by asking.
const known = new Map();
export async function hasRoute(path) {
  if (known.has(path)) return known.get(path);
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  let yes = true;
  if (r.status === 404) {
    const j = await r.json().catch(() => ({}));
    yes = !(j.message || "").startsWith("no such endpoint");
  }
  known.set(path, yes);
  return yes;
}

// A JSON-lines stream (a process's events), one object per callback, until
// it ends or the signal aborts it.
export async function ndjson(path, onEvent, signal) {
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store", signal });
  if (!r.ok) await raise(r);
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.trim()) onEvent(JSON.parse(line));
    }
  }
}
