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
import hashlib
import io
import http.client
import json
import os
import select
import socket
import struct
import time
import tarfile
import urllib.parse

__all__ = ["AirlockError", "Client", "ExecResult", "PtyConnection", "default_socket"]


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
        self.pty = _Pty(self)

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
               idle_timeout=None, workspace=None, review=None, repo=None, rev=None,
               volumes=None, home=None):
        """volumes: [{"name", "target", "readonly"}]; home: a volume name kept as
        the sandbox's $HOME."""
        body = {}
        if volumes is not None:
            body["volumes"] = volumes
        if home is not None:
            body["home"] = home
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

    def list_page(self, state=None, metadata=None, limit=None, next_token=None):
        """One page of the list: (records, the next page's token or None)."""
        params = [("state", state), ("limit", limit), ("next", next_token)]
        for k, v in (metadata or {}).items():
            params.append(("metadata." + k, v))
        q = urllib.parse.urlencode([(k, v) for k, v in params if v is not None])
        doc = self._json("GET", "/v1/sandboxes" + ("?" + q if q else ""))
        return doc["sandboxes"], doc.get("next")

    # ports

    def open_port(self, sandbox_id, port, host_port=None, bind=None):
        """Serve the sandbox's 127.0.0.1:port on the host; the answer's
        "hostPort" is where (any free port unless host_port is given)."""
        body = {"port": port}
        if host_port is not None:
            body["hostPort"] = host_port
        if bind is not None:
            body["bind"] = bind
        return self._json("POST", "/v1/sandboxes/%s/ports" % sandbox_id, body, expect=(201,))

    def ports(self, sandbox_id):
        return self._json("GET", "/v1/sandboxes/%s/ports" % sandbox_id)["ports"]

    def close_port(self, sandbox_id, port):
        return self._json("DELETE", "/v1/sandboxes/%s/ports/%d" % (sandbox_id, port))
    # volumes

    def volumes(self):
        return self._json("GET", "/v1/volumes")["volumes"]

    def create_volume(self, name, size):
        """size: bytes, or a string such as "1G"."""
        return self._json("POST", "/v1/volumes", {"name": name, "size": size}, expect=(201,))

    def get_volume(self, name):
        return self._json("GET", "/v1/volumes/%s" % urllib.parse.quote(name, safe=""))

    def delete_volume(self, name):
        return self._json("DELETE", "/v1/volumes/%s" % urllib.parse.quote(name, safe=""))

    # processes

    @staticmethod
    def _exec_body(argv, env, cwd, stdin, timeout, background, uid=None):
        body = {"argv": list(argv)}
        if uid is not None:
            body["uid"] = uid
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

    def exec(self, sandbox_id, argv, env=None, cwd=None, stdin=None, timeout=None, uid=None):
        """Run a command and yield its events as they come: started, stdout and
        stderr (with "data" as bytes), error, exit. env adds to the sandbox's
        clean environment, cwd is a path inside; uid, when given, must be the
        sandbox's own user (one uid is mapped per sandbox)."""
        body = self._exec_body(argv, env, cwd, stdin, timeout, False, uid)
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

    def exec_background(self, sandbox_id, argv, env=None, cwd=None, stdin=None, timeout=None,
                        uid=None):
        """Start a command and return its process id at once."""
        body = self._exec_body(argv, env, cwd, stdin, timeout, True, uid)
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

    def read_file_to(self, sandbox_id, path, out, chunk=1 << 20):
        """Stream a file of any size into the writable file object `out`;
        returns the number of bytes."""
        conn, resp = self._open("GET", self._files_path(sandbox_id, path))
        try:
            if resp.status != 200:
                data = resp.read()
                raise AirlockError(resp.status, json.loads(data) if data else {})
            n = 0
            while True:
                b = resp.read(chunk)
                if not b:
                    return n
                out.write(b)
                n += len(b)
        finally:
            conn.close()

    # One request carries at most this much (the daemon's body limit is 16 MiB).
    WRITE_PIECE = 8 << 20

    def _put(self, sandbox_id, path, data, **params):
        status, _, body = self.request(
            "PUT", self._files_path(sandbox_id, path, **params),
            body=data, content_type="application/octet-stream")
        doc = json.loads(body) if body else {}
        if status != 200:
            raise AirlockError(status, doc)
        return doc

    def write_file(self, sandbox_id, path, data, parents=True):
        """Write bytes, a str, or a readable file object of any size. More than
        one request's worth goes to a hidden sibling piece by piece and is then
        renamed into place, so that readers see the old file or the whole new
        one."""
        if isinstance(data, str):
            data = data.encode()
        reader = data if hasattr(data, "read") else io.BytesIO(data)
        first = reader.read(self.WRITE_PIECE)
        more = reader.read(self.WRITE_PIECE)
        p = "true" if parents else "false"
        if not more:
            return self._put(sandbox_id, path, first, parents=p)
        head, _, name = path.rstrip("/").rpartition("/")
        tmp = (head + "/" if head else "") + ".airlock-upload-" + os.urandom(6).hex()
        size = 0
        try:
            self._put(sandbox_id, tmp, first, parents=p)
            size = len(first)
            while more:
                self._put(sandbox_id, tmp, more, append="true")
                size += len(more)
                more = reader.read(self.WRITE_PIECE)
            self.rename(sandbox_id, tmp, path, overwrite=True)
        except BaseException:
            try:
                self.delete_file(sandbox_id, tmp)
            except (AirlockError, OSError):
                pass
            raise
        return {"path": path, "size": size}

    def delete_file(self, sandbox_id, path, recursive=False):
        return self._json("DELETE", self._files_path(
            sandbox_id, path, recursive="true" if recursive else None))

    def list_files(self, sandbox_id, path=".", depth=None):
        """depth: how many levels (1 to 32); each entry then has its "path"."""
        return self._json("GET", self._files_path(sandbox_id, path, "/list", depth=depth))

    def mkdir(self, sandbox_id, path, parents=False):
        return self._json("POST", self._files_path(
            sandbox_id, path, "/mkdir", parents="true" if parents else None))

    def rename(self, sandbox_id, src, dst, overwrite=False):
        return self._json("POST", "/v1/sandboxes/%s/files/rename" % sandbox_id,
                          {"from": src, "to": dst, "overwrite": bool(overwrite)})

    def stat(self, sandbox_id, path):
        return self._json("GET", self._files_path(sandbox_id, path, "/stat"))

    def exists(self, sandbox_id, path):
        return self._json("GET", self._files_path(sandbox_id, path, "/exists"))["exists"]

    def upload_tar(self, sandbox_id, path, tar):
        """Extract a tar archive (bytes or a readable file object, at most
        16 MiB per call) beneath directory `path` of the workspace. Only
        regular files and directories; the whole archive is checked first.
        Returns {"path", "files", "dirs", "bytes"}."""
        data = tar.read() if hasattr(tar, "read") else tar
        status, _, body = self.request(
            "PUT", self._files_path(sandbox_id, path, "/tar"), body=data,
            content_type="application/x-tar")
        doc = json.loads(body) if body else {}
        if status != 200:
            raise AirlockError(status, doc)
        return doc

    def download_tar(self, sandbox_id, path=".", out=None, chunk=1 << 20):
        """Directory `path` of the workspace as a tar: bytes, or streamed into
        the writable file object `out` (then the byte count)."""
        sink = out if out is not None else io.BytesIO()
        n = self._download(self._files_path(sandbox_id, path, "/tar"), sink, chunk)
        return n if out is not None else sink.getvalue()

    def upload_dir(self, sandbox_id, local_dir, path="."):
        """A local directory's files and subdirectories into `path`."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            t.add(local_dir, arcname=".", filter=lambda ti: ti if ti.isreg() or ti.isdir()
                  else None)
        return self.upload_tar(sandbox_id, path, buf.getvalue())

    def download_dir(self, sandbox_id, path, local_dir):
        """Directory `path` of the workspace into a local directory."""
        buf = io.BytesIO(self.download_tar(sandbox_id, path))
        with tarfile.open(fileobj=buf, mode="r") as t:
            for m in t.getmembers():
                if not (m.isreg() or m.isdir()) or m.name.startswith("/") or \
                        ".." in m.name.split("/"):
                    raise ValueError("unexpected tar member %r" % m.name)
            t.extractall(local_dir)

    def _download(self, path, out, chunk):
        conn, resp = self._open("GET", path)
        try:
            if resp.status != 200:
                data = resp.read()
                raise AirlockError(resp.status, json.loads(data) if data else {})
            n = 0
            while True:
                b = resp.read(chunk)
                if not b:
                    return n
                out.write(b)
                n += len(b)
        finally:
            conn.close()

    def watch(self, sandbox_id, path=".", recursive=True, timeout=None):
        """Yield a directory's events as they come: {"type": "ready"} first,
        then create, modify, delete, rename (with "from"), overflow, and
        {"type": "end"} when the stream's timeout (seconds) runs out."""
        q = self._q(path=path, recursive="true" if recursive else "false", timeout=timeout)
        conn, resp = self._open("GET", "/v1/sandboxes/%s/files/watch%s" % (sandbox_id, q),
                                timeout=None)
        try:
            if resp.status != 200:
                data = resp.read()
                raise AirlockError(resp.status, json.loads(data) if data else {})
            while True:
                line = resp.readline()
                if not line:
                    break
                yield json.loads(line)
        finally:
            conn.close()

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

    def discard(self, sandbox_id, paths=None):
        """Drop the pending changes (only those at and beneath `paths` when
        given; the rest stays pending)."""
        body = {"paths": list(paths)} if paths else {}
        return self._json("POST", "/v1/sandboxes/%s/discard" % sandbox_id, body)

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

    # capabilities, approvals and the emergency stop (docs/api.md)

    def capabilities(self, sandbox_id):
        """The running sandbox's effective capabilities (allowCapabilities)."""
        return self._json("GET", "/v1/sandboxes/%s/capabilities" % sandbox_id)

    def change_capabilities(self, sandbox_id, grant=None, revoke=None):
        """Grant and revoke entries at once (all or none); returns the new set."""
        body = {}
        if grant is not None:
            body["grant"] = list(grant)
        if revoke is not None:
            body["revoke"] = list(revoke)
        return self._json("POST", "/v1/sandboxes/%s/capabilities" % sandbox_id, body)

    def grant_capabilities(self, sandbox_id, *entries):
        """grant_capabilities(id, {"network": {"allow": "host:443"}}, ...)."""
        return self.change_capabilities(sandbox_id, grant=entries)

    def revoke_capabilities(self, sandbox_id, *entries):
        return self.change_capabilities(sandbox_id, revoke=entries)

    def approvals(self, sandbox_id=None):
        """The asks the gates of the grant's running sandboxes hold, oldest first."""
        return self._json("GET", "/v1/approvals" + self._q(sandbox=sandbox_id))["approvals"]

    def decide_approval(self, approval_id, decision):
        """decision: "allow-once", "allow-sandbox", "deny" or "deny-sandbox"."""
        return self._json("POST", "/v1/approvals/%s" % urllib.parse.quote(approval_id, safe=""),
                          {"decision": decision})

    def estop(self, sandbox_id):
        """The hardware's emergency stop: {"sandbox", "stopped", "driverTold", "receivedAt"}."""
        return self._json("POST", "/v1/sandboxes/%s/estop" % sandbox_id, {})

    # agent runs (docs/agent.md): the host owns the model loop

    def create_run(self, task, model, policy, provider=None, model_route=None, max_turns=None,
                   max_tokens=None, timeout=None, stream=None):
        """Start `airlock agent` in a new sandbox; returns {"id", "state"}. The
        policy's network.routes must hold the model's route (model_route,
        "model" by default)."""
        body = {"task": task, "model": model, "policy": policy}
        for k, v in (("provider", provider), ("modelRoute", model_route), ("maxTurns", max_turns),
                     ("maxTokens", max_tokens), ("timeout", timeout), ("stream", stream)):
            if v is not None:
                body[k] = v
        return self._json("POST", "/v1/runs", body, expect=(202,))

    def get_run(self, run_id):
        """{"id", "state": "running" | "done", "result", "transcript": [...]}."""
        return self._json("GET", "/v1/runs/%s" % run_id)

    def run_events(self, run_id, timeout=None):
        """The run's transcript as it happens: yields ("transcript", entry) for
        each entry, then ("result", result) once, when the run is over."""
        conn, resp = self._open("GET", "/v1/runs/%s/events" % run_id, timeout=timeout)
        try:
            if resp.status != 200:
                data = resp.read()
                raise AirlockError(resp.status, json.loads(data) if data else {})
            name, data = None, []
            while True:
                line = resp.readline()
                if not line:
                    return
                line = line.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif not line and data:
                    yield name or "message", json.loads("\n".join(data))
                    if name == "result":
                        return
                    name, data = None, []
        finally:
            conn.close()

    def wait_run(self, run_id, timeout=600, poll=0.5):
        """Poll until the run is done; returns get_run()'s answer."""
        end = time.monotonic() + timeout
        while True:
            r = self.get_run(run_id)
            if r["state"] == "done" or time.monotonic() > end:
                return r
            time.sleep(poll)

    def health(self):
        return self._json("GET", "/healthz")

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        if status != 200:
            raise AirlockError(status, json.loads(data) if data else {})
        return data.decode()


# terminals (docs/api.md, "Terminals")

_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class PtyConnection:
    """A process's terminal stream (a WebSocket): recv() gives its output as
    bytes, send() types into it. `offset` counts the output bytes received
    since the process started: connect again with it after a disconnect and
    nothing is lost. `exit` is the exit event once the process has ended."""

    def __init__(self, sock, offset):
        self._sock = sock
        self._buf = b""
        self.offset = offset
        self.exit = None
        self.events = []  # the text frames: started, gap, error, exit
        self.closed = False
        self.close_code = None
        self._left = b""  # output read past read_until's needle

    def _read(self, n, deadline):
        while len(self._buf) < n:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError("no frame from the terminal")
            r, _, _ = select.select([self._sock], [], [], left)
            if not r:
                continue
            d = self._sock.recv(65536)
            if not d:
                raise ConnectionError("the terminal's connection closed")
            self._buf += d
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _frame(self, deadline):
        b0, b1 = self._read(2, deadline)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._read(2, deadline))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._read(8, deadline))[0]
        if b1 & 0x80:
            raise ConnectionError("the server masked a frame")
        return b0 & 0x0F, self._read(n, deadline)

    def send_frame(self, opcode, payload=b"", fin=True):
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
        self._sock.sendall(head + mask + masked)

    def send(self, data):
        """Type bytes (or a str) into the terminal, in frames of at most 32 KiB."""
        if isinstance(data, str):
            data = data.encode()
        for i in range(0, len(data), 32 * 1024):
            self.send_frame(0x2, data[i:i + 32 * 1024])

    def recv(self, timeout=None):
        """The next output bytes; None once the stream has ended (see
        `exit` and `close_code`). TimeoutError when nothing came in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.closed:
            op, payload = self._frame(deadline)
            if op == 0x2:
                self.offset += len(payload)
                return payload
            if op == 0x1:
                ev = json.loads(payload)
                self.events.append(ev)
                if ev.get("type") == "exit":
                    self.exit = ev
                elif ev.get("type") == "gap":
                    self.offset = ev["to"]
            elif op == 0x9:
                self.send_frame(0xA, payload)
            elif op == 0x8:
                self.close_code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else 1005
                try:
                    self.send_frame(0x8, payload[:2])
                except OSError:
                    pass
                self.closed = True
                self._sock.close()
        return None

    def read_until(self, needle, timeout=30):
        """Output up to and including `needle` (bytes or str); what came
        after it is kept for the next read_until."""
        if isinstance(needle, str):
            needle = needle.encode()
        got, self._left = self._left, b""
        deadline = time.monotonic() + timeout
        while needle not in got:
            d = self.recv(timeout=max(0.01, deadline - time.monotonic()))
            if d is None:
                raise ConnectionError("the terminal ended before %r; got %r" % (needle, got[-500:]))
            got += d
        end = got.index(needle) + len(needle)
        got, self._left = got[:end], got[end:]
        return got

    def close(self):
        """Leave the terminal (the process goes on running)."""
        if not self.closed:
            try:
                self.send_frame(0x8, struct.pack(">H", 1000))
            except OSError:
                pass
            self.closed = True
            self._sock.close()


class _Pty:
    """client.pty: create, connect, send_input, resize, kill."""

    def __init__(self, client):
        self._c = client

    def create(self, sandbox_id, rows=24, cols=80, cmd=None, env=None, cwd=None, timeout=None):
        """Start a process (a login-less shell by default) on a new terminal
        of rows x cols; returns its pid. It runs until it exits or is killed."""
        body = self._c._exec_body(cmd or ["/bin/bash", "-i"], env, cwd, None, timeout, True)
        body["pty"] = {"rows": rows, "cols": cols}
        return self._c._json("POST", "/v1/sandboxes/%s/exec" % sandbox_id, body,
                             expect=(201,))["pid"]

    def resize(self, sandbox_id, pid, rows, cols):
        return self._c._json("POST", "/v1/sandboxes/%s/processes/%d/resize" % (sandbox_id, pid),
                             {"rows": rows, "cols": cols})

    def send_input(self, sandbox_id, pid, data):
        """Type into the terminal without a stream."""
        return self._c.stdin(sandbox_id, pid, data)

    def kill(self, sandbox_id, pid):
        return self._c.signal(sandbox_id, pid, "KILL")

    def connect(self, sandbox_id, pid, offset=0, timeout=30):
        """The terminal's stream, from output byte `offset` on."""
        c = self._c
        if c.url:
            u = urllib.parse.urlsplit(c.url)
            sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
            host = u.netloc
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(c.socket_path)
            host = "airlockd"
        key = base64.b64encode(os.urandom(16)).decode()
        path = "/v1/sandboxes/%s/processes/%d/pty?offset=%d" % (sandbox_id, pid, offset)
        head = ["GET %s HTTP/1.1" % path, "Host: %s" % host, "Upgrade: websocket",
                "Connection: Upgrade", "Sec-WebSocket-Key: %s" % key, "Sec-WebSocket-Version: 13"]
        for k, v in c._headers().items():
            head.append("%s: %s" % (k, v))
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        resp = b""
        while b"\r\n\r\n" not in resp:
            d = sock.recv(4096)
            if not d:
                sock.close()
                raise ConnectionError("airlockd closed the connection during the handshake")
            resp += d
        head_bytes, rest = resp.split(b"\r\n\r\n", 1)
        lines = head_bytes.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip()
                   for l in lines[1:] if ":" in l}
        if status != 101:
            body = rest
            n = int(headers.get("content-length", "0"))
            while len(body) < n:
                d = sock.recv(4096)
                if not d:
                    break
                body += d
            sock.close()
            try:
                doc = json.loads(body)
            except ValueError:
                doc = {}
            raise AirlockError(status, doc)
        want = base64.b64encode(hashlib.sha1(key.encode() + _WS_GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != want:
            sock.close()
            raise ConnectionError("bad Sec-WebSocket-Accept from airlockd")
        sock.settimeout(None)
        conn = PtyConnection(sock, offset)
        conn._buf = rest
        return conn
