# SPDX-License-Identifier: Apache-2.0
"""A Go HTTP client (stdlib only, net/http with Go's own resolver, a
static binary) inside a gated sandbox with no proxy variables: it asks the
gate's name server for A and AAAA, connects, and is caught by transparent
mode; an allowed upstream answers, an unlisted port is refused and the
refusal audited. Skipped when no Go toolchain is installed (golang-go)."""

import json
import os
import shutil
import subprocess

import pytest

import netns
from netns import HELLO, HTTP_PORT, OTHER_PORT
from test_transparent import ALLOW, NAME, NOPROXY, Run

CLIENT = r'''package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	c := &http.Client{Timeout: 20 * time.Second}
	for _, u := range os.Args[1:] {
		r, err := c.Get(u)
		if err != nil {
			fmt.Printf("error %v\n", err)
			continue
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		fmt.Printf("status %d body %q\n", r.StatusCode, string(b))
	}
}
'''


from netns import net  # noqa: E402,F401  (the test network, one per module)


@pytest.fixture(scope="module")
def go_client(tmp_path_factory):
    go = shutil.which("go")
    if not go:
        pytest.skip("no Go toolchain (install golang-go)")
    d = tmp_path_factory.mktemp("goclient")
    (d / "main.go").write_text(CLIENT)
    cache = "/var/tmp/airlock-test-gocache"  # kept between runs: a cold build takes ~10 s
    env = dict(os.environ, GOCACHE=cache, GOPATH=str(d / "gopath"), CGO_ENABLED="0",
               GO111MODULE="off", HOME=str(d))
    p = subprocess.run([go, "build", "-o", str(d / "client"), "main.go"], cwd=d, env=env,
                       capture_output=True, text=True, timeout=50)
    assert p.returncode == 0, p.stderr
    return (d / "client").read_bytes()


def test_go_http_client_without_proxy(airlock, net, go_client):
    ws = airlock.make_dir()
    (ws / "client").write_bytes(go_client)
    (ws / "client").chmod(0o755)
    airlock.chown(ws)
    logdir = airlock.make_dir("netlog")
    argv = ["nsenter", f"--net={net.client_ns_path}", *airlock.cmd(
        ["run", "-q", "-w", ws, "--net-log", logdir / "net.jsonl", *ALLOW, "--", "/bin/sh", "-c",
         NOPROXY + f"/workspace/client http://{NAME}:{HTTP_PORT}/hello.txt "
                   f"http://{NAME}:{OTHER_PORT}/"])]
    p = subprocess.run(argv, cwd=str(airlock.base), capture_output=True, text=True, timeout=60)
    r = Run(p, logdir)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "status 200 body " + json.dumps(HELLO), lines
    assert lines[1].startswith("error ") and "refused" in lines[1], lines
    denied = [d for d in r.of("transparent", "deny") if d["port"] == OTHER_PORT]
    assert denied and denied[0]["reason"] == "port_not_allowed", r.records
    assert any(d["port"] == HTTP_PORT for d in r.of("transparent", "allow")), r.records
