// SPDX-License-Identifier: Apache-2.0
// One sandbox: what it is, its processes and their output, a terminal, its
// capabilities and pending approvals (where the daemon has them), its audit
// timeline with the chain's verdict, its review diff, its TTL, stop and
// e-stop. Every button is one API call, under the session's grant.
import { del, events, get, hasRoute, ndjson, post } from "./api.js";
import { act, bytes, el, fill, session, stateBadge, tierBadge, toast } from "./app.js";
import { Terminal } from "./term.js";

const b64 = (s) => {
  const bin = atob(s);
  const a = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) a[i] = bin.charCodeAt(i);
  return new TextDecoder().decode(a);
};

function section(id, title, ...body) {
  return el("section", { class: "panel", id, "aria-labelledby": `${id}-h` }, el("h2", { id: `${id}-h` }, title), ...body);
}

// The files of a git-style diff, each with its text.
export function diffFiles(text) {
  const files = [];
  let cur = null;
  for (const line of text.split("\n")) {
    const m = line.match(/^diff --git a\/(.*) b\/(.*)$/);
    if (m) {
      cur = { path: m[2], lines: [] };
      files.push(cur);
    }
    if (cur) cur.lines.push(line);
  }
  return files;
}

export function sandboxPage(id) {
  let sb = null;
  let es = null;
  let timer = null;
  let outAbort = null;
  let term = null;
  let pending = null;
  const base = `/v1/sandboxes/${id}`;

  const head = el("div", { class: "sbhead" });
  const procList = el("ul", { class: "procs", id: "procs" });
  const output = el("pre", { class: "output", id: "output", tabindex: "0", "aria-label": "process output", "aria-live": "off" });
  const outTitle = el("p", { class: "muted", id: "output-title" }, "Choose a process to watch its output.");
  const cmd = el("input", { id: "cmd", type: "text", placeholder: "echo hello", size: "40" });
  const termBox = el("div", { id: "terminal" });
  const capsBody = el("div", {});
  const apprBody = el("div", {});
  const auditVerify = el("p", { id: "audit-verify", "aria-live": "polite" });
  const auditBody = el("tbody", {});
  const reviewBody = el("div", { id: "review" });
  const ttlInput = el("input", { id: "ttl", type: "number", min: "0", step: "60" });

  async function loadRecord() {
    sb = await get(base);
    drawHead();
  }

  function drawHead() {
    const live = ["running", "starting"].includes(sb.state);
    const canAct = sb.grant === session.grant;
    fill(head,
      el("h1", {}, "Sandbox ", el("span", { class: "mono" }, id)),
      el("p", { class: "facts" }, stateBadge(sb.state), " ", tierBadge(sb), " ",
        el("span", {}, `class ${sb.class}`), " · ",
        el("span", {}, `grant ${sb.grant || "–"}`), " · ",
        el("span", {}, `workspace ${sb.workspaceMode}`), " · ",
        el("span", {}, `network ${sb.networkMode}`), " · ",
        el("span", { id: "ttl-now" }, sb.expiresAt ? `expires ${sb.expiresAt.replace("T", " ").slice(0, 19)}` : "no TTL"),
        sb.reason ? ` · ended: ${sb.reason}` : ""),
      el("p", { class: "facts" },
        `cpu ${((sb.usage && sb.usage.cpuMs) || 0)} ms · memory peak ${bytes(sb.usage && sb.usage.memoryPeakBytes)} · ` +
        `requests ${(sb.network && sb.network.allowed) || 0} allowed, ${(sb.network && sb.network.denied) || 0} denied · ` +
        `health ${(sb.health && sb.health.state) || "–"}`),
      live && canAct ? el("div", { class: "actions" },
        el("form", { class: "inline", onsubmit: async (e) => {
          e.preventDefault();
          await act("setting the TTL", () => post(`${base}/ttl`, { ttl: Number(ttlInput.value) }));
          toast("TTL set");
          loadRecord();
        } }, el("label", { for: "ttl" }, "TTL (s, 0 = none)"), ttlInput, el("button", { type: "submit" }, "Set TTL")),
        el("button", { type: "button", id: "stop", onclick: async () => {
          await act("stopping", () => del(base));
          toast(`sandbox ${id} stopped`);
          await refresh();
          loadReview();
        } }, "Stop"),
        el("button", { type: "button", id: "killswitch", class: "danger", onclick: async () => {
          const r = await act("kill switch", () => post("/v1/stop", { ids: [id] }));
          const s = r.stopped && r.stopped[0];
          toast(s ? `frozen and killed (${s.how})` : "stopped", !s || !s.stopped);
          refresh();
        } }, "Kill switch"),
        estopButton) : null);
  }

  const estopButton = el("button", { type: "button", id: "estop", class: "danger", hidden: true, onclick: async () => {
    const r = await act("e-stop", () => post(`${base}/estop`, {}));
    toast(r && r.stopped ? "every actuator stopped; motion stays off until the sandbox ends" : "e-stop sent");
    refresh();
  } }, "E-stop");

  async function loadProcs() {
    const r = await get(`${base}/processes`);
    fill(procList, ...r.processes.map((p) => el("li", {},
      el("button", { type: "button", class: "link", "data-pid": p.pid, onclick: () => watch(p.pid, p.argv) },
        `#${p.pid} ${p.argv.join(" ")}`), " ",
      el("span", { class: `pstate pstate-${p.state}` }, p.state === "exited" ? `exit ${p.exitCode}` : p.state))));
  }

  async function watch(pid, argv) {
    if (outAbort) outAbort.abort();
    outAbort = new AbortController();
    output.textContent = "";
    outTitle.textContent = `output of #${pid} ${(argv || []).join(" ")}`;
    output.dataset.pid = pid;
    try {
      await ndjson(`${base}/processes/${pid}/events?encoding=utf8`, (ev) => {
        if (ev.type === "stdout" || ev.type === "stderr") {
          output.append(el("span", { class: ev.type }, ev.text !== undefined ? ev.text : b64(ev.data)));
          output.scrollTop = output.scrollHeight;
        } else if (ev.type === "exit") {
          output.append(el("span", { class: "exit" }, `\n[exit ${ev.exitCode}${ev.errorCode ? " " + ev.errorCode : ""}]\n`));
          output.dataset.exited = "1";
          loadProcs();
        } else if (ev.type === "gap") {
          output.append(el("span", { class: "exit" }, `[events ${ev.from}–${ev.to} are no longer kept]\n`));
        }
      }, outAbort.signal);
    } catch (e) {
      if (e.name !== "AbortError") output.append(`\n[${e.message}]\n`);
    }
  }

  async function run(e) {
    e.preventDefault();
    if (!cmd.value.trim()) return;
    const r = await act("running", () => post(`${base}/exec`, { argv: ["sh", "-c", cmd.value], background: true }));
    await loadProcs();
    watch(r.pid, ["sh", "-c", cmd.value]);
  }

  async function openTerminal() {
    const r = await act("opening a terminal", () => post(`${base}/exec`, {
      argv: ["/bin/sh", "-i"], pty: { rows: 24, cols: 80 }, background: true }));
    if (term) term.close();
    term = new Terminal(id, r.pid);
    fill(termBox, term.node);
    term.connect();
    loadProcs();
  }

  async function loadCaps() {
    if (!(await hasRoute(`${base}/capabilities`))) {
      fill(capsBody, el("p", { class: "muted" }, "This daemon has no live capabilities (no /capabilities route)."));
      return;
    }
    let c;
    try {
      c = await get(`${base}/capabilities`);
    } catch (e) {
      fill(capsBody, el("p", { class: "muted" }, `Capabilities: ${e.message}`));
      return;
    }
    const allow = (c.network && (c.network.allow || c.network.allowed)) || [];
    const add = el("input", { id: "cap-add", type: "text", placeholder: "host:port", size: "30" });
    fill(capsBody,
      el("h3", {}, "Network allow-list"),
      el("ul", { id: "caps-network" }, allow.map((a) => {
        const v = typeof a === "string" ? a : a.allow || JSON.stringify(a);
        return el("li", {}, el("span", { class: "mono" }, v), " ",
          el("button", { type: "button", "data-revoke": v, onclick: async () => {
            await act(`revoking ${v}`, () => post(`${base}/capabilities`, { revoke: [{ network: { allow: v } }] }));
            toast(`${v} revoked`);
            loadCaps();
          } }, "Revoke"));
      })),
      el("form", { class: "inline", onsubmit: async (e) => {
        e.preventDefault();
        await act(`allowing ${add.value}`, () => post(`${base}/capabilities`, { grant: [{ network: { allow: add.value } }] }));
        toast(`${add.value} allowed`);
        loadCaps();
      } }, el("label", { for: "cap-add" }, "Allow"), add, el("button", { type: "submit" }, "Add")),
      c.tools ? el("p", {}, "Tools: ", JSON.stringify(c.tools)) : null);
  }

  async function loadTools() {
    try {
      const t = await get(`${base}/tools`);
      return t.tools.map((x) => x.name);
    } catch (e) {
      return [];
    }
  }

  async function loadApprovals() {
    if (!(await hasRoute("/v1/approvals"))) {
      fill(apprBody, el("p", { class: "muted" }, "This daemon has no approvals (no /v1/approvals route)."));
      return;
    }
    let r;
    try {
      r = await get(`/v1/approvals?sandbox=${id}`);
    } catch (e) {
      fill(apprBody, el("p", { class: "muted" }, `Approvals: ${e.message}`));
      return;
    }
    const all = Array.isArray(r) ? r : r.approvals || [];
    const mine = all.filter((a) => !a.sandbox || a.sandbox === id);
    if (!mine.length) {
      fill(apprBody, el("p", { class: "muted", id: "no-approvals" }, "Nothing waits for a decision."));
      return;
    }
    const decide = (a, decision) => async () => {
      await act(`deciding ${a.id}`, () => post(`/v1/approvals/${a.id}`, { decision }));
      toast(`${decision}: ${a.id}`);
      loadApprovals();
    };
    fill(apprBody, el("ul", { id: "approvals" }, mine.map((a) => el("li", { "data-approval": a.id },
      el("span", { class: "mono" }, a.kind || "ask"), " ",
      el("strong", {}, a.kind === "tool" ? `${a.tool}${a.argsDigest ? " (" + a.argsDigest.slice(0, 12) + "…)" : ""}`
        : `${a.host}${a.port ? ":" + a.port : ""}${a.protocol ? " (" + a.protocol + ")" : ""}`), " ",
      a.expires ? el("span", { class: "muted" }, `until ${String(a.expires).replace("T", " ").slice(0, 19)}`) : null, " ",
      el("button", { type: "button", "data-decision": "allow-once", onclick: decide(a, "allow-once") }, "Allow once"),
      el("button", { type: "button", "data-decision": "allow-sandbox", onclick: decide(a, "allow-sandbox") }, "Allow for this sandbox"),
      el("button", { type: "button", "data-decision": "deny", class: "danger", onclick: decide(a, "deny") }, "Deny"),
      el("button", { type: "button", "data-decision": "deny-sandbox", class: "danger", onclick: decide(a, "deny-sandbox") }, "Deny for this sandbox")))));
  }

  async function loadAudit() {
    const text = await get(`${base}/audit`, { text: true });
    const lines = text.split("\n").filter(Boolean).map((l) => JSON.parse(l));
    fill(auditBody, ...lines.slice(-200).reverse().map((l) => {
      const { seq, ts, kind, sandbox, prev, ...rest } = l;
      return el("tr", {}, el("td", { class: "num" }, seq), el("td", {}, (ts || "").replace("T", " ").slice(0, 23)),
        el("td", { class: "mono" }, kind), el("td", { class: "mono small" }, JSON.stringify(rest).slice(0, 300)));
    }));
    try {
      const v = await get("/v1/ui/audit/verify");
      auditVerify.className = v.ok ? "verify ok" : "verify bad";
      auditVerify.textContent = v.ok
        ? `✔ hash chain verified: ${v.lines} lines, seq ${v.firstSeq}–${v.lastSeq}`
        : `✖ hash chain broken at seq ${v.badSeq}: ${v.reason}`;
    } catch (e) {
      auditVerify.className = "verify bad";
      auditVerify.textContent = `the chain could not be verified: ${e.message}`;
    }
  }

  async function loadReview() {
    if (!sb || sb.workspaceMode !== "overlay") {
      fill(reviewBody, el("p", { class: "muted" }, "Not a review sandbox: its workspace is written directly."));
      return;
    }
    // One review call at a time: the daemon's diff, accept and discard
    // each take the kept changes' lock.
    for (const b of reviewBody.querySelectorAll("button")) b.disabled = true;
    let text;
    try {
      text = await get(`${base}/diff`, { text: true });
    } catch (e) {
      fill(reviewBody, el("p", { class: "muted" }, `No diff: ${e.message}`));
      return;
    }
    const files = diffFiles(text);
    const ended = !["running", "starting", "stopping"].includes(sb.state);
    const canAct = sb.grant === session.grant && session.permissions.allowExec;
    fill(reviewBody,
      ended ? null : el("p", { class: "muted" }, "Accept and discard wait for the end: stop the sandbox first."),
      files.length ? null : el("p", { class: "muted", id: "no-changes" }, "No changes are pending."),
      ...files.map((f) => el("details", { open: true, class: "difffile", "data-path": f.path },
        el("summary", {}, el("span", { class: "mono" }, f.path), " ",
          canAct && ended ? el("button", { type: "button", "data-accept": f.path, onclick: async (e) => {
            e.preventDefault();
            const r = await act(`accepting ${f.path}`, () => post(`${base}/accept`, { paths: [f.path] }));
            toast(`${f.path} accepted (${r.written} written, ${r.removed} removed)`);
            loadReview();
          } }, "Accept") : null, " ",
          canAct && ended ? el("button", { type: "button", class: "danger", "data-discard": f.path, onclick: async (e) => {
            e.preventDefault();
            await act(`discarding ${f.path}`, () => post(`${base}/discard`, { paths: [f.path] }));
            toast(`${f.path} discarded: the host keeps its own`);
            loadReview();
          } }, "Discard") : null),
        el("pre", { class: "diff" }, f.lines.map((l) => el("span", {
          class: l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : null,
        }, l + "\n"))))),
      canAct && ended && files.length ? el("button", { type: "button", id: "discard", class: "danger", onclick: async () => {
        await act("discarding", () => post(`${base}/discard`, {}));
        toast("the remaining changes were discarded");
        loadReview();
      } }, "Discard the rest") : null);
  }

  async function refresh() {
    try {
      await loadRecord();
      await loadProcs();
    } catch (e) {
      fill(head, el("h1", {}, "Sandbox ", id), el("p", { class: "bad" }, e.message));
    }
  }

  // At most one refresh a second, however fast the events come.
  function soon() {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      refresh();
      loadAudit().catch(() => {});
      loadApprovals().catch(() => {});
    }, 1000);
  }

  const node = el("div", {},
    head,
    section("processes", "Processes",
      el("form", { class: "inline", onsubmit: run },
        el("label", { for: "cmd" }, "Run"), cmd, el("button", { type: "submit", id: "run" }, "Run in background"),
        el("button", { type: "button", id: "open-terminal", onclick: openTerminal }, "Open a terminal")),
      procList, outTitle, output),
    section("term", "Terminal", termBox),
    section("caps", "Capabilities", capsBody),
    section("approvals-panel", "Pending approvals", apprBody),
    section("audit", "Audit timeline", auditVerify,
      el("table", {}, el("thead", {}, el("tr", {}, ["seq", "time", "kind", "details"].map((h) => el("th", { scope: "col" }, h)))), auditBody)),
    section("review-panel", "Review", reviewBody));

  return {
    node,
    async enter() {
      await refresh();
      await Promise.all([loadAudit(), loadReview(), loadCaps(), loadApprovals()].map((p) => p.catch((e) => toast(e.message, true))));
      const tools = await loadTools();
      // The e-stop is the hardware's: shown where the sandbox drives a device.
      estopButton.hidden = !tools.some((t) => t.startsWith("hw."));
      if (tools.length) capsBody.append(el("p", {}, `Tools given: ${tools.join(", ")}`));
      es = new AbortController();
      events(`/v1/events?sandbox=${id}`, soon, es.signal).catch(() => {});
      timer = setInterval(() => { refresh(); loadApprovals().catch(() => {}); }, 3000);
    },
    leave() {
      clearInterval(timer);
      clearTimeout(pending);
      if (es) es.abort();
      if (outAbort) outAbort.abort();
      if (term) term.close();
    },
  };
}
