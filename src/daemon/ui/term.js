// SPDX-License-Identifier: Apache-2.0
// An in-browser terminal over the daemon's PTY WebSocket (docs/api.md,
// Terminals). A plain one: output is shown as text, with colour and cursor
// sequences taken out; keys are typed into the terminal as the bytes a
// terminal would send.
import { csrfToken } from "./api.js";
import { el } from "./app.js";

const MAX_TEXT = 200000;
const enc = new TextEncoder();

const KEYS = {
  Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b",
  ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D",
  Home: "\x1b[H", End: "\x1b[F", Delete: "\x1b[3~",
};

export class Terminal {
  constructor(sandbox, pid) {
    this.sandbox = sandbox;
    this.pid = pid;
    this.text = "";
    this.dec = new TextDecoder();
    this.screen = el("pre", { class: "term", tabindex: "0", role: "textbox", "aria-multiline": "true",
      "aria-label": `terminal of process ${pid}`, id: `term-${pid}`,
      onkeydown: (e) => this.key(e), onpaste: (e) => this.paste(e) });
    this.status = el("p", { class: "muted", "aria-live": "polite" }, "connecting…");
    this.node = el("div", { class: "termbox" }, this.status, this.screen);
  }

  connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    // The session's token rides as a subprotocol: a WebSocket sends no
    // other header of the page's.
    const ws = new WebSocket(`${proto}//${location.host}/v1/sandboxes/${this.sandbox}/processes/${this.pid}/pty`,
      ["airlock", `airlock.csrf.${csrfToken()}`]);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      this.status.textContent = `connected to process ${this.pid} (type in the box below)`;
      this.screen.focus();
    };
    ws.onmessage = (m) => {
      if (typeof m.data === "string") {
        const ev = JSON.parse(m.data);
        if (ev.type === "exit") this.status.textContent = `process ${this.pid} exited (${ev.exitCode})`;
        if (ev.type === "gap") this.write(`\n[output ${ev.from}–${ev.to} is no longer kept]\n`);
        return;
      }
      this.write(this.dec.decode(new Uint8Array(m.data), { stream: true }));
    };
    ws.onclose = () => {
      if (!this.status.textContent.includes("exited")) this.status.textContent = "disconnected";
    };
    this.ws = ws;
  }

  write(s) {
    s = s.replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, "")
      .replace(/\x1b\[[0-9;?]*[ -\/]*[@-~]/g, "")
      .replace(/\x1b[()][0-9A-Za-z]/g, "")
      .replace(/\x1b[=>78]/g, "")
      .replace(/\r\n/g, "\n")
      .replace(/\x07/g, "");
    let t = this.text;
    for (const ch of s) {
      if (ch === "\b" || ch === "\x7f") t = t.slice(0, -1);
      else if (ch === "\r") continue;
      else t += ch;
    }
    if (t.length > MAX_TEXT) t = t.slice(t.length - MAX_TEXT);
    this.text = t;
    this.screen.textContent = t;
    this.screen.scrollTop = this.screen.scrollHeight;
  }

  send(s) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(enc.encode(s));
  }

  key(e) {
    if (e.metaKey) return;
    let s = null;
    if (e.ctrlKey && e.key.length === 1 && /[a-z@\[\\\]^_]/i.test(e.key)) {
      s = String.fromCharCode(e.key.toUpperCase().charCodeAt(0) & 0x1f);
    } else if (KEYS[e.key]) {
      s = KEYS[e.key];
    } else if (e.key.length === 1 && !e.ctrlKey && !e.altKey) {
      s = e.key;
    }
    // Tab leaves the terminal with Shift, so the page stays usable by keyboard.
    if (e.key === "Tab" && e.shiftKey) return;
    if (s !== null) {
      e.preventDefault();
      this.send(s);
    }
  }

  paste(e) {
    e.preventDefault();
    this.send(e.clipboardData.getData("text"));
  }

  close() {
    if (this.ws) this.ws.close();
  }
}
