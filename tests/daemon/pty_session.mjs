// SPDX-License-Identifier: Apache-2.0
// The shell session of test_pty_api.py, from the JavaScript client
// (clients/js): node pty_session.mjs SOCKET TOKEN SANDBOX_ID. Prints one JSON
// line of what it saw; exits non-zero on any failure.
import { Client } from "../../clients/js/index.js";

const [socketPath, token, sid] = process.argv.slice(2);
const c = new Client({ socketPath, token });
const PROMPT = "JS-PROMPT> ";
setTimeout(() => { console.error("timed out"); process.exit(3); }, 45000).unref();

let screen = Buffer.alloc(0);
let mark = 0;
const waiters = [];
function onData(d) {
  screen = Buffer.concat([screen, Buffer.from(d)]);
  for (const w of [...waiters]) w();
}
function expect(needle) {
  return new Promise((resolve) => {
    const check = () => {
      const i = screen.indexOf(needle, mark);
      if (i < 0) return false;
      const got = screen.subarray(mark, i + needle.length).toString();
      mark = i + needle.length;
      waiters.splice(waiters.indexOf(check), 1);
      resolve(got);
      return true;
    };
    waiters.push(check);
    check();
  });
}

const t = await c.pty.create(sid, {
  rows: 30, cols: 100, cmd: ["/bin/bash", "--norc", "--noprofile", "-i"], envs: { PS1: PROMPT }, onData,
});
await expect(PROMPT);
await t.sendInput("tty; echo TTY-DONE\r");
const ttyOut = await expect("\nTTY-DONE");
const tty = (ttyOut.match(/\/dev\/pts\/\d+/) || ["none"])[0];
await expect(PROMPT);
await c.pty.resize(sid, t.pid, { rows: 40, cols: 120 });
await t.sendInput("stty size\r");
await expect("40 120");
await expect(PROMPT);

// Leave, type while away, come back from the offset we had.
const before = screen.length;
const offset = t.offset;
await t.disconnect();
await c.pty.sendInput(sid, t.pid, "echo away-$((6*7))\r");
await new Promise((r) => setTimeout(r, 500));
const t2 = await c.pty.connect(sid, t.pid, { offset, onData });
await expect("away-42\r\n");
await expect(PROMPT);
await t2.sendInput("exit 5\r");
const exit = await t2.wait();

// Everything kept, from the start: the two connections' output is exactly it.
let all = Buffer.alloc(0);
const t3 = await c.pty.connect(sid, t.pid, { offset: 0, onData: (d) => { all = Buffer.concat([all, Buffer.from(d)]); } });
await t3.wait();
console.log(JSON.stringify({
  tty, size: "40 120", exitCode: exit && exit.exitCode, before, offset,
  reconnected: screen.toString("base64"), expected: all.toString("base64"),
}));
