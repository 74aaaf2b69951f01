// SPDX-License-Identifier: Apache-2.0
// test_js_client.py's tour of the JavaScript client (clients/js): node
// js_client_tour.mjs SOCKET TOKEN SANDBOX_ID. Every call checks what it got;
// prints one JSON line of what the Python side checks again; exits non-zero
// on the first failure.
import assert from "node:assert/strict";
import { AirlockError, Client } from "../../clients/js/index.js";

const [socketPath, token, sid] = process.argv.slice(2);
const c = new Client({ socketPath, token });
setTimeout(() => { console.error("timed out"); process.exit(3); }, 50000).unref();

const out = {};

// processes: a streamed run, its output and exit
const r = await c.run(sid, ["sh", "-c", "echo out; echo err >&2; exit 7"], { env: { X: "1" } });
assert.equal(r.stdout.toString(), "out\n");
assert.equal(r.stderr.toString(), "err\n");
assert.equal(r.exitCode, 7);
const withIn = await c.run(sid, ["cat"], { stdin: "fed" });
assert.equal(withIn.stdout.toString(), "fed");

// files: write small and large (pieces renamed into place), read back
await c.mkdir(sid, "d/e", { parents: true });
await c.writeFile(sid, "d/e/small.txt", "hello");
assert.equal((await c.readFile(sid, "d/e/small.txt")).toString(), "hello");
const big = Buffer.alloc((8 << 20) + 12345);
for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
assert.deepEqual(await c.writeFile(sid, "big.bin", big), { path: "big.bin", size: big.length });
assert.ok((await c.readFile(sid, "big.bin")).equals(big));
assert.equal((await c.stat(sid, "big.bin")).size, big.length);
assert.equal(await c.exists(sid, "d/e/small.txt"), true);
assert.equal(await c.exists(sid, "nope"), false);
await c.rename(sid, "d/e/small.txt", "d/moved.txt");
const names = (await c.listFiles(sid, "d", { depth: 2 })).entries.map((e) => e.path || e.name);
assert.ok(names.some((n) => n.endsWith("moved.txt")), JSON.stringify(names));
assert.ok(!(await c.listFiles(sid, ".")).entries.some((e) => e.name.startsWith(".airlock-upload-")));

// a tar out and back in under another name
const tar = await c.downloadTar(sid, "d");
assert.ok(tar.length >= 1024 && tar.length % 512 === 0);
const up = await c.uploadTar(sid, "copy", tar);
assert.ok(up.files >= 1, JSON.stringify(up));
assert.equal((await c.readFile(sid, "copy/moved.txt")).toString(), "hello");

// watch sees a file made after it is ready
const seen = [];
const w = c.watch(sid, ".", { timeout: 10 });
for await (const ev of w) {
  seen.push(ev.type);
  if (ev.type === "ready") await c.writeFile(sid, "watched.txt", "x");
  if (ev.path && ev.path.endsWith("watched.txt")) break;
}
assert.ok(seen.includes("ready") && seen.length > 1, JSON.stringify(seen));

// errors carry the API's code
await assert.rejects(c.readFile(sid, "../etc/passwd"), (e) => e instanceof AirlockError && e.status >= 400 && e.error !== "");
await assert.rejects(c.readFile(sid, "missing"), (e) => e.status === 404 && e.error === "not_found");

await c.deleteFile(sid, "copy", { recursive: true });
assert.equal(await c.exists(sid, "copy"), false);

out.processes = (await c.processes(sid)).length >= 0;
out.listed = (await c.list()).some((s) => s.id === sid);
out.audit = (await c.audit(sid)).length;
out.health = typeof (await c.health()).status;
out.metrics = (await c.metrics()).includes("airlock");
out.bigSize = big.length;
console.log(JSON.stringify(out));
