// SPDX-License-Identifier: Apache-2.0
// Grants (what this session's grant may do) and settings (the default
// policy, the resource classes, the daemon's health and what `airlock
// doctor` reports of this host).
import { get } from "./api.js";
import { bytes, el, fill, session } from "./app.js";

const yes = (b) => el("span", { class: b ? "ok" : "muted" }, b ? "✔ yes" : "✖ no");

export function grantsPage() {
  const p = session.permissions;
  const node = el("section", { "aria-labelledby": "h-grants" },
    el("h1", { id: "h-grants" }, "Grants"),
    el("p", {}, "This browser acts as grant ", el("strong", { id: "grant-name" }, session.grant),
      `; the session ends ${new Date(session.expiresAt).toLocaleString()} at the latest.`),
    el("table", { id: "grant" },
      el("caption", { class: "sr-only" }, "What the grant allows"),
      el("tbody", {},
        el("tr", {}, el("th", { scope: "row" }, "create and destroy sandboxes, set TTLs"), el("td", {}, yes(p.allowSandbox))),
        el("tr", {}, el("th", { scope: "row" }, "run commands, write files, review"), el("td", {}, yes(p.allowExec))),
        el("tr", {}, el("th", { scope: "row" }, "name host paths"), el("td", {}, yes(p.allowHostWorkspace))),
        el("tr", {}, el("th", { scope: "row" }, "repositories (clone, push)"), el("td", {}, yes(p.allowGit))),
        el("tr", {}, el("th", { scope: "row" }, "live sandboxes at most"), el("td", {}, p.maxSandboxes ? String(p.maxSandboxes) : "no own maximum")),
        el("tr", {}, el("th", { scope: "row" }, "classes"), el("td", {}, p.classes || "any")),
        el("tr", {}, el("th", { scope: "row" }, "host tools"), el("td", {}, p.tools || "none")))),
    el("h2", {}, "Making and revoking grants"),
    el("p", {}, "No API call can mint or revoke a grant, so no dashboard session can either: grants are made on the host, by whoever owns the daemon's state, with ",
      el("code", {}, "airlock grant create --name NAME [--allow-sandbox] [--allow-exec] …"), " and revoked with ",
      el("code", {}, "airlock grant revoke NAME"), ". A revoked grant's dashboard sessions end with its next request."));
  return { node };
}

export function settingsPage() {
  const health = el("p", { id: "health" }, "…");
  const doctor = el("div", { id: "doctor" }, el("p", { class: "muted" }, "asking airlock doctor…"));
  const node = el("section", { "aria-labelledby": "h-settings" },
    el("h1", { id: "h-settings" }, "Settings"),
    el("h2", {}, "Daemon"), health,
    el("h2", {}, "Resource classes"),
    el("table", { id: "classes" },
      el("thead", {}, el("tr", {}, ["class", "memory", "cpus", "cpu time", "longest command", "network rate", "this grant"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, session.classes.map((c) => el("tr", {},
        el("th", { scope: "row" }, c.name), el("td", {}, bytes(c.memory)), el("td", {}, String(c.cpus)),
        el("td", {}, `${c.cpuTime} s`), el("td", {}, `${c.timeout} s`), el("td", {}, `${c.netRate / 1e6} MB/s`),
        el("td", {}, yes(c.allowed)))))),
    el("h2", {}, "Default policy"),
    el("p", { class: "muted" }, "What a sandbox gets when its create names no policy (docs/policy.md); a create's class replaces the limits."),
    el("pre", { class: "policy", id: "default-policy", tabindex: "0" }, JSON.stringify(session.defaultPolicy, null, 2)),
    el("h2", {}, "Isolation on this host (airlock doctor)"), doctor);
  return {
    node,
    async enter() {
      try {
        const h = await get("/healthz");
        health.textContent = `${h.ok ? "✔ healthy" : "✖ not healthy"} · version ${h.version} · ${h.sandboxes} sandboxes`;
      } catch (e) {
        health.textContent = `health: ${e.message}`;
      }
      try {
        const d = await get("/v1/ui/doctor");
        fill(doctor, ...(d.tiers || []).map((t) => el("div", { class: "tier-report" },
          el("h3", {}, `${t.name}: `, el("span", { class: t.available ? "ok" : "bad" }, t.available ? "works" : t.built === false ? "not built" : "does not work")),
          t.why ? el("p", { class: "muted" }, t.why) : null,
          el("ul", {}, (t.checks || []).map((c) => el("li", {},
            el("span", { class: c.ok ? "ok" : "bad" }, c.ok ? "✔ " : "✖ "), el("strong", {}, c.name), ` ${c.detail}`,
            c.fix ? el("div", { class: "fix" }, `fix: ${c.fix}`) : null))))));
        if (!d.tiers) fill(doctor, el("pre", {}, JSON.stringify(d, null, 2)));
      } catch (e) {
        fill(doctor, el("p", { class: "bad" }, `airlock doctor: ${e.message}`));
      }
    },
  };
}
