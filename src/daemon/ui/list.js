// SPDX-License-Identifier: Apache-2.0
// The sandboxes: a live list. The event stream (GET /v1/events, the
// grant's own sandboxes' audit lines) says when something happened; a poll
// every few seconds brings the usage the sparklines draw.
import { events, get, post } from "./api.js";
import { act, bytes, el, session, stateBadge, tierBadge, toast } from "./app.js";

const POLL_MS = 3000;
const POINTS = 40;
const FRESH_MAX = 20;
const history = new Map(); // id -> {at, cpu, net, cpuPts, memPts, netPts}

function sparkline(points, label, fmt) {
  const w = 80, h = 20;
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("class", "spark");
  const last = points.length ? points[points.length - 1] : 0;
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${label}: ${fmt(last)}`);
  const title = document.createElementNS(NS, "title");
  title.textContent = `${label}: ${fmt(last)}`;
  svg.append(title);
  const base = document.createElementNS(NS, "line");
  base.setAttribute("x1", 0);
  base.setAttribute("x2", w);
  base.setAttribute("y1", h - 0.5);
  base.setAttribute("y2", h - 0.5);
  svg.append(base);
  if (points.length > 1) {
    // The samples so far fill the width; past POINTS the oldest go.
    const max = Math.max(...points, 1e-9);
    const step = w / (points.length - 1);
    const pl = document.createElementNS(NS, "polyline");
    pl.setAttribute("points", points.map((v, i) =>
      `${(i * step).toFixed(1)},${(h - 1 - (v / max) * (h - 2)).toFixed(1)}`).join(" "));
    svg.append(pl);
  }
  return el("span", { class: "sparkcell" }, svg, el("span", { class: "sparkval" }, fmt(last)));
}

function record(sb) {
  const now = Date.now();
  let h = history.get(sb.id);
  if (!h) {
    h = { at: 0, cpu: 0, net: 0, cpuPts: [], memPts: [], netPts: [] };
    history.set(sb.id, h);
  }
  const cpu = (sb.usage && sb.usage.cpuMs) || 0;
  const net = sb.network ? (sb.network.bytesUp || 0) + (sb.network.bytesDown || 0) : 0;
  const mem = (sb.usage && sb.usage.memoryPeakBytes) || 0;
  if (h.at && now - h.at >= 500) {
    const dt = (now - h.at) / 1000;
    const push = (a, v) => {
      a.push(Math.max(0, v));
      if (a.length > POINTS) a.shift();
    };
    push(h.cpuPts, (cpu - h.cpu) / 10 / dt); // percent of one cpu
    push(h.memPts, mem);
    push(h.netPts, (net - h.net) / dt);
  } else if (!h.at) {
    h.memPts.push(mem);
  }
  if (!h.at || now - h.at >= 500) {
    h.at = now;
    h.cpu = cpu;
    h.net = net;
  }
  return h;
}

function healthCell(sb) {
  const st = sb.health && sb.health.state;
  if (!st) return el("span", { class: "muted" }, "–");
  return el("span", { class: `health health-${st}` }, st);
}

// A row's cells; the first (the link) stays the same element across updates,
// so that keyboard focus on it survives the live refresh.
const rows = new Map(); // id -> tr

function cells(sb) {
  const h = record(sb);
  const n = sb.network || {};
  const live = ["running", "starting", "stopping"].includes(sb.state);
  return [
    el("td", {}, stateBadge(sb.state)),
    el("td", {}, tierBadge(sb)),
    el("td", {}, sb.class || "–"),
    el("td", {}, live ? sparkline(h.cpuPts, "cpu", (v) => `${v.toFixed(0)}%`) : "–"),
    el("td", {}, live ? sparkline(h.memPts, "memory peak", bytes) : "–"),
    el("td", {}, live ? sparkline(h.netPts, "network", (v) => `${bytes(v)}/s`) : "–"),
    el("td", { class: "num" }, el("span", { class: "ok", title: "requests allowed" }, `✔ ${n.allowed || 0}`), " ",
      el("span", { class: "bad", title: "requests denied" }, `✖ ${n.denied || 0}`)),
    el("td", {}, healthCell(sb)),
    el("td", {}, (sb.createdAt || "").replace("T", " ").slice(0, 19)),
  ];
}

function row(sb) {
  let tr = rows.get(sb.id);
  if (!tr) {
    tr = el("tr", { "data-id": sb.id }, el("td", {}, el("a", { href: `#/sandbox/${sb.id}`, class: "mono" }, sb.id)));
    rows.set(sb.id, tr);
  }
  tr.dataset.state = sb.state;
  tr.replaceChildren(tr.firstChild, ...cells(sb));
  return tr;
}

export function sandboxesPage() {
  const filters = { state: "live", cls: "", text: "" };
  let sandboxes = [];
  let timer = null;
  let es = null;
  let refreshing = null;

  const tbody = el("tbody", {});
  const count = el("p", { class: "muted", "aria-live": "polite" });
  const stateSel = el("select", { id: "f-state", onchange: (e) => { filters.state = e.target.value; draw(); } },
    el("option", { value: "live" }, "live"), el("option", { value: "" }, "all"),
    el("option", { value: "running" }, "running"), el("option", { value: "destroyed" }, "destroyed"),
    el("option", { value: "failed" }, "failed"));
  const classSel = el("select", { id: "f-class", onchange: (e) => { filters.cls = e.target.value; draw(); } },
    el("option", { value: "" }, "any"), session.classes.map((c) => el("option", { value: c.name }, c.name)));
  const text = el("input", { id: "f-text", type: "search", placeholder: "id or metadata",
    oninput: (e) => { filters.text = e.target.value.trim(); draw(); } });

  const createClass = el("select", { id: "c-class" },
    session.classes.filter((c) => c.allowed).map((c) =>
      el("option", { value: c.name, selected: c.name === "small" }, `${c.name} (${bytes(c.memory)}, ${c.cpus} cpu)`)));
  const createTtl = el("input", { id: "c-ttl", type: "number", min: "0", step: "60", value: "3600" });
  const createHosts = el("input", { id: "c-hosts", type: "text", size: "30", placeholder: "api.example.com, *.pkg.example.org:443",
    "aria-describedby": "c-hosts-help" });
  const createBtn = el("button", { type: "submit", id: "create" }, "Create sandbox");
  const canCreate = session.permissions.allowSandbox;
  const createForm = el("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    createBtn.disabled = true;
    try {
      const body = { class: createClass.value };
      const ttl = Number(createTtl.value);
      if (ttl > 0) body.ttl = ttl;
      const hosts = createHosts.value.split(/[\s,]+/).filter(Boolean);
      if (hosts.length) body.policy = { network: { allow: hosts } };
      const sb = await act("creating a sandbox", () => post("/v1/sandboxes", body));
      toast(`sandbox ${sb.id} is ${sb.state}`);
      refresh();
    } finally {
      createBtn.disabled = false;
    }
  } },
  el("label", { for: "c-class" }, "Class"), createClass,
  el("label", { for: "c-ttl" }, "TTL (s)"), createTtl,
  el("label", { for: "c-hosts" }, "Allowed hosts"), createHosts,
  el("span", { id: "c-hosts-help", class: "sr-only" }, "Host names the sandbox may reach through the network gate; none: no network"),
  createBtn);

  function visible(sb) {
    if (filters.state === "live" && !["running", "starting", "stopping"].includes(sb.state)) return false;
    if (filters.state && filters.state !== "live" && sb.state !== filters.state) return false;
    if (filters.cls && sb.class !== filters.cls) return false;
    if (filters.text) {
      const hay = sb.id + " " + JSON.stringify(sb.metadata || {});
      if (!hay.includes(filters.text)) return false;
    }
    return true;
  }

  function draw() {
    const shown = sandboxes.filter(visible).map(row);
    const now = [...tbody.children];
    if (now.length !== shown.length || now.some((tr, i) => tr !== shown[i])) tbody.replaceChildren(...shown);
    count.textContent = `${shown.length} of ${sandboxes.length} sandboxes`;
  }

  async function refresh() {
    if (refreshing) return refreshing;
    refreshing = (async () => {
      try {
        const r = await get("/v1/sandboxes?limit=500");
        // A list carries the usage the daemon last heard (every 15 s); the
        // live rows on show (at most FRESH_MAX) are asked for a fresh one.
        const live = r.sandboxes.filter((x) => visible(x) && x.state === "running").slice(0, FRESH_MAX);
        const fresh = await Promise.all(live.map((x) => get(`/v1/sandboxes/${x.id}`).catch(() => x)));
        const byId = new Map(fresh.map((x) => [x.id, x]));
        sandboxes = r.sandboxes.map((x) => byId.get(x.id) || x);
        draw();
      } catch (e) {
        count.textContent = `could not list sandboxes: ${e.message}`;
      } finally {
        refreshing = null;
      }
    })();
    return refreshing;
  }

  const node = el("section", { "aria-labelledby": "h-sb" },
    el("h1", { id: "h-sb" }, "Sandboxes"),
    canCreate ? createForm : el("p", { class: "muted" }, `grant ${session.grant} may not create sandboxes`),
    el("form", { class: "inline filters", role: "search", onsubmit: (e) => e.preventDefault() },
      el("label", { for: "f-state" }, "State"), stateSel,
      el("label", { for: "f-class" }, "Class"), classSel,
      el("label", { for: "f-text" }, "Find"), text),
    count,
    el("table", { id: "sandboxes" },
      el("caption", { class: "sr-only" }, "Sandboxes, live"),
      el("thead", {}, el("tr", {}, ["id", "state", "isolation", "class", "cpu", "memory", "network",
        "allowed / denied", "health", "created"].map((h) => el("th", { scope: "col" }, h)))),
      tbody));

  return {
    node,
    async enter() {
      await refresh();
      timer = setInterval(refresh, POLL_MS);
      // A busy log (a flood of gate decisions) brings one refresh a second,
      // not one per line.
      let soon = null;
      es = new AbortController();
      events("/v1/events", () => {
        if (!soon) soon = setTimeout(() => { soon = null; refresh(); }, 1000);
      }, es.signal).catch(() => {});
    },
    leave() {
      clearInterval(timer);
      if (es) es.abort();
    },
  };
}
