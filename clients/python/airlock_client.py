# SPDX-License-Identifier: Apache-2.0
"""A small client for airlockd's HTTP API (docs/api.md), standard library only.

    from airlock_client import Client

    c = Client(token="alk_...")                  # the default unix socket
    sb = c.create(sandbox_class="small", metadata={"task": "42"}, ttl=600)
    for ev in c.exec(sb["id"], ["python3", "-c", "print(6 * 7)"]):
        if ev["type"] == "stdout":
            print(ev["data"].decode(), end="")   # data arrives as bytes
    r = c.run(sb["id"], ["sh", "-c", "echo hi; exit 3"])
    assert r.exit_code == 3 and r.stdout == b"hi\\n"
    c.write_file(sb["id"], "src/main.py", b"print(1)\\n")
    c.delete(sb["id"])

Every method raises AirlockError for an answer of 400 or above, carrying the
status and the API's {"error", "message", ...} body.
"""

import base64
import http.client
import json
import os
import socket
import urllib.parse

__all__ = ["AirlockError", "Client", "ExecResult", "default_socket"]


def default_socket():
    """The socket airlockd listens on by default for this user."""
    if "AIRLOCK_SOCKET" in os.environ:
        return os.environ["AIRLOCK_SOCKET"]
    if os.geteuid() == 0:
        return "/run/airlock/airlockd.sock"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(xdg, "airlock", "airlockd.sock") if xdg else None


class AirlockError(Exception):
    def __init__(self, status, body):
        self.status = status
        self.body = body if isinstance(body, dict) else {}
        self.error = self.body.get("error", "http_%d" % status)
        self.message = self.body.get("message", "")
        super().__init__("%d %s: %s" % (status, self.error, self.message))


class ExecResult:
    """What a foreground command did: its output and how it ended."""

    def __init__(self):
        self.pid = None
        self.stdout = b""
        self.stderr = b""
        self.exit_code = None
        self.signal = None
        self.error_code = None
        self.duration_ms = None
        self.usage = None
        self.events = []

    def __repr__(self):
        return "ExecResult(exit_code=%r, error_code=%r, stdout=%r, stderr=%r)" % (
            self.exit_code, self.error_code, self.stdout[:200], self.stderr[:200])


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("airlockd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Client:
    def __init__(self, socket_path=None, url=None, token=None, timeout=120):
        """Reach airlockd over a unix socket (the default) or, with
        url="http://127.0.0.1:7070", over TCP. token defaults to $AIRLOCK_TOKEN."""
        self.url = url or (None if socket_path else os.environ.get("AIRLOCK_URL"))
        self.socket_path = socket_path or (None if self.url else default_socket())
        self.token = token if token is not None else os.environ.get("AIRLOCK_TOKEN")
        self.timeout = timeout
        if not self.url and not self.socket_path:
            raise ValueError("no socket: give socket_path or url, or set XDG_RUNTIME_DIR")

    # transport

    def _connection(self, timeout=None):
        t = self.timeout if timeout is None else timeout
        if self.url:
            u = urllib.parse.urlsplit(self.url)
            return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=t)
        return _UnixConnection(self.socket_path, t)

    def _headers(self, extra=None):
        h = {}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if extra:
            h.update(extra)
        return h

    def _open(self, method, path, body=None, content_type=None, timeout=None):
        conn = self._connection(timeout)
        headers = self._headers({"Content-Type": content_type} if content_type else None)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        return conn, conn.getresponse()

    def request(self, method, path, body=None, content_type=None, timeout=None):
        """One request; returns (status, headers, body bytes) whatever the status."""
        conn, resp = self._open(method, path, body, content_type, timeout)
        try:
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def _json(self, method, path, body=None, expect=(200, 201)):
        status, _, data = self.request(method, path, body)
        try:
            doc = json.loads(data) if data else {}
        except ValueError:
            doc = {"error": "bad_response", "message": data[:200].decode(errors="replace")}
        if status not in expect:
            raise AirlockError(status, doc)
        return doc

    @staticmethod
    def _q(**params):
        items = [(k, v) for k, v in params.items() if v is not None]
        return "?" + urllib.parse.urlencode(items) if items else ""

    # sandboxes

    def create(self, policy=None, sandbox_class=None, metadata=None, ttl=None,
               idle_timeout=None, workspace=None, review=None, repo=None, rev=None):
        body = {}
        if review is not None:
            body["review"] = review
        if repo is not None:
            body["repo"] = repo
        if rev is not None:
            body["rev"] = rev
        if policy is not None:
            body["policy"] = policy
        if sandbox_class is not None:
            body["class"] = sandbox_class
        if metadata is not None:
            body["metadata"] = metadata
        if ttl is not None:
            body["ttl"] = ttl
        if idle_timeout is not None:
            body["idleTimeout"] = idle_timeout
        if workspace is not None:
            body["workspace"] = workspace
        return self._json("POST", "/v1/sandboxes", body, expect=(201,))

    def list(self, state=None, metadata=None, limit=None):
        params = [("state", state), ("limit", limit)]
        for k, v in (metadata or {}).items():
            params.append(("metadata." + k, v))
        q = urllib.parse.urlencode([(k, v) for k, v in params if v is not None])
        return self._json("GET", "/v1/sandboxes" + ("?" + q if q else ""))["sandboxes"]

    def get(self, sandbox_id):
        return self._json("GET", "/v1/sandboxes/%s" % sandbox_id)

    def delete(self, sandbox_id):
        return self._json("DELETE", "/v1/sandboxes/%s" % sandbox_id)

    def set_ttl(self, sandbox_id, ttl):
        return self._json("POST", "/v1/sandboxes/%s/ttl" % sandbox_id, {"ttl": ttl})

    # processes

    @staticmethod
    def _exec_body(argv, env, cwd, stdin, timeout, background):
        body = {"argv": list(argv)}
        if env is not None:
            body["env"] = env
        if cwd is not None:
            body["cwd"] = cwd
        if stdin is not None:
            if isinstance(stdin, str):
                stdin = stdin.encode()
            body["stdin"] = base64.b64encode(stdin).decode()
        if timeout is not None:
            body["timeout"] = timeout
        if background:
            body["background"] = True
        return body

    def _stream(self, method, path, body=None):
        conn, resp = self._open(method, path, body, timeout=None)
        try:
            if resp.status != 200:
                data = resp.read()
                try:
                    doc = json.loads(data)
                except ValueError:
                    doc = {}
                raise AirlockError(resp.status, doc)
            while True:
                line = resp.readline()
                if not line:
                    break
                ev = json.loads(line)
                if ev.get("type") in ("stdout", "stderr") and "data" in ev:
                    ev["data"] = base64.b64decode(ev["data"])
                yield ev
        finally:
            conn.close()

    def exec(self, sandbox_id, argv, env=None, cwd=None, stdin=None, timeout=None):
        """Run a command and yield its events as they come: started, stdout and
        stderr (with "data" as bytes), error, exit."""
        body = self._exec_body(argv, env, cwd, stdin, timeout, False)
        return self._stream("POST", "/v1/sandboxes/%s/exec" % sandbox_id, body)

    @staticmethod
    def collect(events):
        r = ExecResult()
        for ev in events:
            r.events.append(ev)
            t = ev.get("type")
            if t == "started":
                r.pid = ev.get("pid")
            elif t == "stdout":
                r.stdout += ev["data"]
            elif t == "stderr":
                r.stderr += ev["data"]
            elif t == "exit":
                r.pid = ev.get("pid", r.pid)
                r.exit_code = ev.get("exitCode")
                r.signal = ev.get("signal")
                r.error_code = ev.get("errorCode")
                r.duration_ms = ev.get("durationMs")
                r.usage = ev.get("usage")
        return r

    def run(self, sandbox_id, argv, **kw):
        """exec() to the end; returns an ExecResult."""
        return self.collect(self.exec(sandbox_id, argv, **kw))

    def exec_background(self, sandbox_id, argv, env=None, cwd=None, stdin=None, timeout=None):
        """Start a command and return its process id at once."""
        body = self._exec_body(argv, env, cwd, stdin, timeout, True)
        return self._json("POST", "/v1/sandboxes/%s/exec" % sandbox_id, body, expect=(201,))["pid"]

    def events(self, sandbox_id, pid):
        """A background process's events: what was kept, then as they come."""
        return self._stream("GET", "/v1/sandboxes/%s/processes/%d/events" % (sandbox_id, pid))

    def processes(self, sandbox_id):
        return self._json("GET", "/v1/sandboxes/%s/processes" % sandbox_id)["processes"]

    def stdin(self, sandbox_id, pid, data=b"", eof=False):
        if isinstance(data, str):
            data = data.encode()
        body = {"data": base64.b64encode(data).decode(), "eof": bool(eof)}
        return self._json("POST", "/v1/sandboxes/%s/processes/%d/stdin" % (sandbox_id, pid), body)

    def signal(self, sandbox_id, pid, sig="TERM"):
        return self._json("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sandbox_id, pid),
                          {"signal": sig})

    # files

    def _files_path(self, sandbox_id, path, suffix="", **params):
        return "/v1/sandboxes/%s/files%s%s" % (sandbox_id, suffix, self._q(path=path, **params))

    def read_file(self, sandbox_id, path):
        status, _, data = self.request("GET", self._files_path(sandbox_id, path))
        if status != 200:
            raise AirlockError(status, json.loads(data) if data else {})
        return data

    def write_file(self, sandbox_id, path, data, parents=True):
        if isinstance(data, str):
            data = data.encode()
        status, _, body = self.request(
            "PUT", self._files_path(sandbox_id, path, parents="true" if parents else "false"),
            body=data, content_type="application/octet-stream")
        doc = json.loads(body) if body else {}
        if status != 200:
            raise AirlockError(status, doc)
        return doc

    def delete_file(self, sandbox_id, path, recursive=False):
        return self._json("DELETE", self._files_path(
            sandbox_id, path, recursive="true" if recursive else None))

    def list_files(self, sandbox_id, path="."):
        return self._json("GET", self._files_path(sandbox_id, path, "/list"))

    # review and git

    def _raw(self, method, path, body=None):
        status, _, data = self.request(method, path, body)
        if status != 200:
            raise AirlockError(status, json.loads(data) if data else {})
        return data

    def diff(self, sandbox_id):
        """The unified diff of a review sandbox's changes (bytes)."""
        return self._raw("GET", "/v1/sandboxes/%s/diff" % sandbox_id)

    def accept(self, sandbox_id, paths=None):
        body = {"paths": list(paths)} if paths else {}
        return self._json("POST", "/v1/sandboxes/%s/accept" % sandbox_id, body)

    def discard(self, sandbox_id):
        return self._json("POST", "/v1/sandboxes/%s/discard" % sandbox_id, {})

    def export(self, sandbox_id):
        """The agent's new commits as an mbox of patches (bytes)."""
        return self._raw("POST", "/v1/sandboxes/%s/export" % sandbox_id, {})

    def push(self, sandbox_id, branch, force=False, open_pr=False):
        body = {"branch": branch}
        if force:
            body["force"] = True
        if open_pr:
            body["openPr"] = True
        return self._json("POST", "/v1/sandboxes/%s/push" % sandbox_id, body)

    # the rest

    def audit(self, sandbox_id):
        status, _, data = self.request("GET", "/v1/sandboxes/%s/audit" % sandbox_id)
        if status != 200:
            raise AirlockError(status, json.loads(data) if data else {})
        return [json.loads(l) for l in data.splitlines() if l.strip()]

    def tools(self, sandbox_id):
        """The host tools the sandbox may call: [{name, description, inputSchema}]."""
        return self._json("GET", "/v1/sandboxes/%s/tools" % sandbox_id)["tools"]

    def health(self):
        return self._json("GET", "/healthz")

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        if status != 200:
            raise AirlockError(status, json.loads(data) if data else {})
        return data.decode()
