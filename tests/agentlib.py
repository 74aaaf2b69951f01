# SPDX-License-Identifier: Apache-2.0
"""A scripted model server for the host-owned agent loop's tests: it speaks
the Messages API (POST /v1/messages) and the Chat Completions API (POST
/v1/chat/completions), whole or streamed as server-sent events, and answers
each call with the next step of a script:

  {"calls": [("bash", {"command": "make test"}), ...]}   tool calls
  {"text": "done"}                                         the end
  {"status": 500}                                          an API error
  {"repeat": {...}}                                        this step forever

Every request is kept (its headers and body) for the test to look at."""

import http.server
import itertools
import json
import threading

KEY = "sk-agent-test-5d1f0c2e8b9a7364"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        srv = self.server.model
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        with srv.lock:
            srv.requests.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
            step = srv.next_step()
        if self.headers.get(srv.key_header, "") != srv.key_value:
            return self._send(401, {"error": {"type": "authentication_error", "message": "bad key"}})
        if "status" in step:
            return self._send(step["status"], {"error": {"type": "api_error", "message": "scripted failure"}})
        anthropic = self.path.endswith("/v1/messages")
        stream = bool(body.get("stream"))
        call_id = f"c{len(srv.requests)}"
        calls = [(f"{call_id}_{i}", name, inp) for i, (name, inp) in enumerate(step.get("calls", []))]
        text = step.get("text", "")
        if anthropic:
            if stream:
                return self._sse(list(self._anthropic_events(text, calls)))
            content = ([{"type": "text", "text": text}] if text else []) + [
                {"type": "tool_use", "id": i, "name": nm, "input": inp} for i, nm, inp in calls]
            return self._send(200, {"id": "msg_" + call_id, "type": "message", "role": "assistant",
                                    "content": content,
                                    "stop_reason": "tool_use" if calls else "end_turn",
                                    "usage": {"input_tokens": 100, "output_tokens": 20}})
        if stream:
            return self._sse(list(self._openai_chunks(text, calls)), done=True)
        msg = {"role": "assistant", "content": text or None}
        if calls:
            msg["tool_calls"] = [{"id": i, "type": "function",
                                  "function": {"name": nm, "arguments": json.dumps(inp)}}
                                 for i, nm, inp in calls]
        return self._send(200, {"id": "chat_" + call_id, "object": "chat.completion",
                                "choices": [{"index": 0, "message": msg,
                                             "finish_reason": "tool_calls" if calls else "stop"}],
                                "usage": {"prompt_tokens": 100, "completion_tokens": 20}})

    @staticmethod
    def _anthropic_events(text, calls):
        yield "message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 100, "output_tokens": 1}}}
        idx = 0
        if text:
            yield "content_block_start", {"type": "content_block_start", "index": 0,
                                          "content_block": {"type": "text", "text": ""}}
            for half in (text[: len(text) // 2], text[len(text) // 2:]):
                yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                              "delta": {"type": "text_delta", "text": half}}
            yield "content_block_stop", {"type": "content_block_stop", "index": 0}
            idx = 1
        for i, nm, inp in calls:
            yield "content_block_start", {"type": "content_block_start", "index": idx,
                                          "content_block": {"type": "tool_use", "id": i, "name": nm, "input": {}}}
            js = json.dumps(inp)
            for k in range(0, len(js), 7):
                yield "content_block_delta", {"type": "content_block_delta", "index": idx,
                                              "delta": {"type": "input_json_delta", "partial_json": js[k:k + 7]}}
            yield "content_block_stop", {"type": "content_block_stop", "index": idx}
            idx += 1
        yield "message_delta", {"type": "message_delta",
                                "delta": {"stop_reason": "tool_use" if calls else "end_turn"},
                                "usage": {"output_tokens": 20}}
        yield "message_stop", {"type": "message_stop"}

    @staticmethod
    def _openai_chunks(text, calls):
        def chunk(delta, finish=None, usage=None):
            c = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                c = {"object": "chat.completion.chunk", "choices": [], "usage": usage}
            return None, c
        yield chunk({"role": "assistant"})
        if text:
            yield chunk({"content": text[: len(text) // 2]})
            yield chunk({"content": text[len(text) // 2:]})
        for n, (i, nm, inp) in enumerate(calls):
            js = json.dumps(inp)
            yield chunk({"tool_calls": [{"index": n, "id": i, "type": "function",
                                         "function": {"name": nm, "arguments": ""}}]})
            for k in range(0, len(js), 5):
                yield chunk({"tool_calls": [{"index": n, "function": {"arguments": js[k:k + 5]}}]})
        yield chunk({}, "tool_calls" if calls else "stop")
        yield chunk(None, usage={"prompt_tokens": 100, "completion_tokens": 20})

    def _send(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-call-id", f"call-{len(self.server.model.requests)}")
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events, done=False):
        out = b""
        for name, obj in events:
            if name:
                out += f"event: {name}\n".encode()
            out += f"data: {json.dumps(obj)}\n\n".encode()
        if done:
            out += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-call-id", f"call-{len(self.server.model.requests)}")
        self.end_headers()
        # Cut across events, so that the reader must join the pieces.
        for k in range(0, len(out), 97):
            piece = out[k:k + 97]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")


class ScriptedModel:
    def __init__(self, script, provider="anthropic"):
        self.script = list(script)
        self.provider = provider
        self.requests = []
        self.lock = threading.Lock()
        if provider == "anthropic":
            self.key_header, self.key_value = "x-api-key", KEY
        else:
            self.key_header, self.key_value = "authorization", "Bearer " + KEY
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.model = self
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def next_step(self):
        if not self.script:
            return {"text": "(script over)"}
        step = self.script[0]
        if "repeat" in step:
            return step["repeat"]
        return self.script.pop(0)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()

    def agent_args(self, secrets_file, model="test-model"):
        """The flags that point `airlock agent` at this server."""
        if self.provider == "anthropic":
            inject = "model:x-api-key=${secret:MODEL_KEY}"
        else:
            inject = "model:authorization=Bearer ${secret:MODEL_KEY}"
        return ["--provider", self.provider, "--model", model,
                "--route", f"model=http://127.0.0.1:{self.port}", "--inject", inject,
                "--allow-private", "127.0.0.1", "--secrets", secrets_file]


def write_secrets(airlock, d):
    sf = d / "secrets.env"
    sf.write_text(f"MODEL_KEY={KEY}\n")
    sf.chmod(0o600)
    airlock.chown(d)
    return sf


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
