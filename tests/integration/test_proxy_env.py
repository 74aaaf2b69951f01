# SPDX-License-Identifier: Apache-2.0
"""The proxy-mode environment for clients that read no proxy variable: the
JVM through JAVA_TOOL_OPTIONS (an unmodified Java program reaches an
allowed host through the gate and is refused an unlisted one), gRPC's
grpc_proxy."""

import http.server
import json
import shutil
import socketserver
import threading

import pytest


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.server.seen.append(self.path)
        body = b"hello from upstream\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Plain(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen = []
        self.port = self.server_address[1]


@pytest.fixture(scope="module")
def plain():
    srv = Plain()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()


JAVA = r"""
import java.net.*;
import java.io.*;

public class Get {
    public static void main(String[] a) throws Exception {
        for (String u : a) {
            HttpURLConnection c = (HttpURLConnection) new URL(u).openConnection();
            c.setConnectTimeout(20000);
            c.setReadTimeout(20000);
            int code = c.getResponseCode();
            String denied = c.getHeaderField("X-Airlock-Denied");
            System.out.println(u + " " + code + " " + denied);
        }
    }
}
"""


@pytest.mark.skipif(not shutil.which("java"), reason="no java on this host")
def test_jvm_goes_through_the_gate(airlock, plain):
    plain.seen.clear()
    ws = airlock.make_dir()
    (ws / "Get.java").write_text(JAVA)
    airlock.chown(ws)
    d = airlock.make_dir("env")
    p = airlock.run([
        "run", "-q", "-w", ws, "--audit", d / "audit.jsonl", "--memory", "1g",
        "--allow", f"plain.test:{plain.port}", "--host", "plain.test=127.0.0.1",
        "--host", "other.test=127.0.0.1", "--allow-private", "127.0.0.0/8",
        "--", "java", "-Xmx128m", "-Xshare:off", "/workspace/Get.java",
        f"http://plain.test:{plain.port}/ok", f"http://other.test:{plain.port}/no",
    ], timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines == [f"http://plain.test:{plain.port}/ok 200 null",
                     f"http://other.test:{plain.port}/no 403 not_allowed"], p.stdout + p.stderr
    assert plain.seen == ["/ok"]
    events = [json.loads(line) for line in open(d / "audit.jsonl")]
    decisions = [(e["host"], e["decision"]) for e in events if e["kind"] == "net.decision"]
    assert ("plain.test", "allow") in decisions and ("other.test", "deny") in decisions


def test_proxy_env_for_jvm_and_grpc(airlock):
    ws = airlock.make_dir()
    p = airlock.run(["run", "-q", "-w", ws, "--allow", "example.test", "--", "env"], timeout=60)
    assert p.returncode == 0, p.stderr
    env = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    assert env["grpc_proxy"] == "http://127.0.0.1:3128"
    opts = env["JAVA_TOOL_OPTIONS"].split()
    for o in ("-Dhttp.proxyHost=127.0.0.1", "-Dhttp.proxyPort=3128",
              "-Dhttps.proxyHost=127.0.0.1", "-Dhttps.proxyPort=3128"):
        assert o in opts, opts
    # No network, no proxy variables.
    p = airlock.run(["run", "-q", "-w", ws, "--", "env"], timeout=60)
    assert "JAVA_TOOL_OPTIONS" not in p.stdout and "grpc_proxy" not in p.stdout
