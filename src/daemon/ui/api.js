// SPDX-License-Identifier: Apache-2.0
// The dashboard's one way to the API. A session has two halves: the cookie
// (HttpOnly; the browser sends it with every request, and also to every
// other port of this host, such as a page a sandbox serves through a port
// forward) and the token, which only this page holds: it arrives in the
// login's redirect fragment, is kept in this origin's localStorage (no
// other port's page can read it) and goes with every request in a header,
// or as a WebSocket subprotocol. The grant's own token is never here.

const KEY = "airlock.csrf";
let csrf = null;

export function setCsrf(token) {
  csrf = token || null;
  try {
    if (csrf) localStorage.setItem(KEY, csrf);
    else localStorage.removeItem(KEY);
  } catch (e) {
    // no storage: the token lives as long as the page
  }
}

// The token a login just handed over (#csrf=...; the fragment is then
// replaced so that it stays out of the address bar), else the kept one.
export function loadCsrf() {
  const m = location.hash.match(/^#csrf=([0-9a-f]{64})$/);
  if (m) {
    setCsrf(m[1]);
    history.replaceState(null, "", `${location.pathname}#/`);
    return;
  }
  try {
    csrf = localStorage.getItem(KEY);
  } catch (e) {
    csrf = null;
  }
}

// The kept token, read at each request: a login in another tab renews the
// cookie and the token together for every tab.
export function csrfToken() {
  try {
    return localStorage.getItem(KEY) || csrf || "";
  } catch (e) {
    return csrf || "";
  }
}

const auth = () => ({ "X-Airlock-CSRF": csrfToken() });

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
  const headers = auth();
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
  const r = await fetch(path, { headers: auth(), credentials: "same-origin", cache: "no-store" });
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
  await lines(path, signal, (line) => {
    if (line.trim()) onEvent(JSON.parse(line));
  });
}

// A stream's lines, one callback each, until it ends or the signal aborts.
async function lines(path, signal, onLine) {
  const r = await fetch(path, { headers: auth(), credentials: "same-origin", cache: "no-store", signal });
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
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      onLine(line);
    }
  }
}

// A Server-Sent Events stream (/v1/events), read with fetch so that it
// carries the session's token (an EventSource cannot send a header): the
// callback gets each event's data. Its errors are the caller's to ignore;
// a stream that ends is not reopened.
export function events(path, onData, signal) {
  let data = [];
  return lines(path, signal, (line) => {
    if (line === "") {
      if (data.length) onData(data.join("\n"));
      data = [];
    } else if (line.startsWith("data:")) data.push(line.slice(line[5] === " " ? 6 : 5));
  });
}
