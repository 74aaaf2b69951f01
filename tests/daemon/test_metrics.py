# SPDX-License-Identifier: Apache-2.0
"""/metrics is Prometheus text exposition, and its numbers follow what
happened."""

import re


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{name: {"type", "help", "samples": [(labels dict, value)]}}, strictly:
    every line is a comment, a TYPE/HELP line or a sample of a declared
    family."""
    families = {}
    for line in text.splitlines():
        assert line == line.strip() and line, repr(line)
        if line.startswith("# HELP "):
            name, help_ = line[7:].split(" ", 1)
            families.setdefault(name, {"samples": []})["help"] = help_
            continue
        if line.startswith("# TYPE "):
            name, typ = line[7:].split(" ")
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped")
            families.setdefault(name, {"samples": []})["type"] = typ
            continue
        assert not line.startswith("#"), line
        m = SAMPLE.match(line)
        assert m, line
        name, _, labels, value = m.groups()
        labels = dict(LABEL.findall(labels or ""))
        v = float(value)
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[:-len(suffix)] in families and \
                    families[name[:-len(suffix)]].get("type") == "histogram":
                fam = name[:-len(suffix)]
        assert fam in families, "sample %s before its TYPE" % name
        families[fam]["samples"].append((name, labels, v))
    return families


def value(fams, name, **labels):
    fam = name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[:-len(suffix)] in fams:
            fam = name[:-len(suffix)]
    for n, l, v in fams[fam]["samples"]:
        if n == name and all(l.get(k) == x for k, x in labels.items()):
            return v
    raise KeyError((name, labels))


def test_metrics_parse_and_count(api, sandbox):
    status, headers, body = api.request("GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    before = parse(body.decode())
    for name, typ in [("airlock_sandboxes", "gauge"), ("airlock_sandbox_creates_total", "counter"),
                      ("airlock_sandbox_destroys_total", "counter"), ("airlock_exec_total", "counter"),
                      ("airlock_exec_duration_seconds", "histogram"),
                      ("airlock_exec_start_seconds", "histogram"),
                      ("airlock_gate_decisions_total", "counter"),
                      ("airlock_gate_bytes_total", "counter"), ("airlock_oom_kills_total", "counter"),
                      ("airlock_exec_timeouts_total", "counter")]:
        assert before[name]["type"] == typ, name
        assert before[name]["help"]
    assert {l["state"] for _, l, _ in before["airlock_sandboxes"]["samples"]} >= {
        "starting", "running", "stopping", "destroyed", "failed", "pooled"}
    assert value(before, "airlock_sandboxes", state="running") >= 1
    assert {l["result"] for _, l, _ in before["airlock_gate_decisions_total"]["samples"]} == {
        "allowed", "denied"}

    api.run(sandbox["id"], ["true"])
    api.run(sandbox["id"], ["sleep", "10"], timeout=0.2)
    extra = api.create(sandbox_class="small")
    api.delete(extra["id"])

    after = parse(api.metrics())
    assert value(after, "airlock_exec_total") == value(before, "airlock_exec_total") + 2
    assert value(after, "airlock_exec_timeouts_total") == \
        value(before, "airlock_exec_timeouts_total") + 1
    assert value(after, "airlock_sandbox_creates_total") == \
        value(before, "airlock_sandbox_creates_total") + 1
    assert value(after, "airlock_sandbox_destroys_total") == \
        value(before, "airlock_sandbox_destroys_total") + 1

    h = "airlock_exec_duration_seconds"
    buckets = [(float(l["le"]), v) for n, l, v in after[h]["samples"] if n == h + "_bucket"]
    assert buckets[-1][0] == float("inf")
    assert [b for b, _ in buckets] == sorted(b for b, _ in buckets)
    counts = [v for _, v in buckets]
    assert counts == sorted(counts), "buckets are cumulative"
    assert counts[-1] == value(after, h + "_count") >= 2
    # The 0.2 s timeout, give or take the loop timer's millisecond granularity.
    assert value(after, h + "_sum") > 0.19
