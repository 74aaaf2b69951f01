// SPDX-License-Identifier: Apache-2.0
// The dashboard's shell: the session, the pages by location hash, the
// helpers every page builds its DOM with (text only: nothing from the API
// is ever parsed as HTML).
import { ApiError, get, loadCsrf, post, setCsrf } from "./api.js";
import { sandboxesPage } from "./list.js";
import { sandboxPage } from "./sandbox.js";
import { grantsPage, settingsPage } from "./pages.js";

export const session = { grant: null, permissions: {}, classes: [], defaultPolicy: null };

// el("button", {class: "x", onclick: f}, "text", child...)
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), (ev) => handled(v(ev)));
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// An event handler's failure is shown, once, and goes no further.
function handled(r) {
  if (r && typeof r.catch === "function") {
    r.catch((err) => {
      if (!err.shown) toast(err.message, true);
    });
  }
}

// Replace a node's children, leaving out the null and false that
// conditional parts give.
export function fill(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

export function toast(message, bad = false) {
  const t = document.getElementById("toast");
  t.textContent = message;
  t.className = bad ? "bad show" : "show";
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (t.className = ""), 6000);
}

// Run an action; its error becomes a message naming what was refused.
export async function act(what, f) {
  try {
    const r = await f();
    return r;
  } catch (e) {
    const m = e instanceof ApiError ? `${what}: ${e.message} (${e.status} ${e.code})` : `${what}: ${e.message}`;
    toast(m, true);
    e.shown = true;
    throw e;
  }
}

export function bytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
}

// The isolation tiers: each its colour, its shape and its word, so that no
// tier is told by colour alone.
const TIERS = {
  namespace: { icon: "◆", label: "namespaces" },
  container: { icon: "▣", label: "container" },
  gvisor: { icon: "⬢", label: "gVisor" },
  microvm: { icon: "⬛", label: "microVM" },
};
export function tierBadge(sb) {
  const t = sb.isolation || sb.tier || "namespace";
  const k = TIERS[t] ? t : "namespace";
  return el("span", { class: `tier tier-${k}`, title: `isolation: ${TIERS[k].label}` },
    el("span", { "aria-hidden": "true" }, TIERS[k].icon), " ", TIERS[t] ? TIERS[k].label : t);
}

export function stateBadge(state) {
  return el("span", { class: `state state-${state}` }, state);
}

let current = null;

async function render() {
  if (current && current.leave) current.leave();
  current = null;
  const main = document.getElementById("main");
  const hash = location.hash || "#/";
  let m;
  let page;
  if ((m = hash.match(/^#\/sandbox\/([0-9a-f]{16})$/))) page = sandboxPage(m[1]);
  else if (hash === "#/grants") page = grantsPage();
  else if (hash === "#/settings") page = settingsPage();
  else page = sandboxesPage();
  for (const a of document.querySelectorAll("nav a")) {
    const on = (a.dataset.nav === "sandboxes" && (hash === "#/" || hash.startsWith("#/sandbox"))) ||
      hash === `#/${a.dataset.nav}`;
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  current = page;
  main.replaceChildren(page.node);
  main.focus({ preventScroll: true });
  if (page.enter) await page.enter();
}

async function start() {
  loadCsrf();
  let s;
  try {
    s = await get("/v1/ui/session");
  } catch (e) {
    document.getElementById("main").replaceChildren(
      el("section", { class: "notice" },
        el("h1", {}, "Not logged in"),
        el("p", {}, "Run ", el("code", {}, "airlock ui"),
          " on the host with your grant's token: it prints a one-time address that logs this browser in.")));
    return;
  }
  Object.assign(session, s);
  document.getElementById("who").textContent = `grant: ${s.grant}`;
  const out = document.getElementById("logout");
  out.hidden = false;
  out.addEventListener("click", async () => {
    await act("logging out", () => post("/v1/ui/logout"));
    setCsrf(null);
    location.hash = "#/";
    location.reload();
  });
  window.addEventListener("hashchange", render);
  await render();
}

start();
