# SPDX-License-Identifier: Apache-2.0
"""Another grant's diff of a running review sandbox is a read: it never
starts a copy of the sandbox's changes on the host. Before, each reader's
diff copied the layer again (host disk work a read-only grant could repeat
at will) and, while it copied, the maker's own diff failed (502 "being
copied for another request")."""

import tempfile
import threading


def test_readers_diffs_neither_copy_nor_block_the_makers(two_grants):
    d = two_grants
    c = d.client(d.admin, timeout=60)
    r = d.client(d.reader, timeout=60)
    ws = tempfile.mkdtemp(prefix="ws-", dir=d.tmp)
    sb = c.create(sandbox_class="small", workspace=ws, review=True)["id"]
    assert c.run(sb, ["sh", "-c", "for i in $(seq 1 200); do head -c 200000 /dev/urandom"
                      " > /workspace/f$i; done; echo one > /workspace/first"]).exit_code == 0
    st, _, body = c.request("GET", f"/v1/sandboxes/{sb}/diff")
    assert st == 200, body[:300]
    assert b"first" in body
    # The agent writes on; readers diff as often as they like meanwhile.
    assert c.run(sb, ["sh", "-c", "echo two > /workspace/second"]).exit_code == 0
    got = []

    def read():
        got.append(r.request("GET", f"/v1/sandboxes/{sb}/diff"))
    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    st, _, body = c.request("GET", f"/v1/sandboxes/{sb}/diff")
    for t in threads:
        t.join(60)
    assert st == 200, f"the maker's diff failed while readers diffed: {st} {body[:300]!r}"
    assert b"second" in body
    for st, _, rbody in got:
        assert st in (200, 409), (st, rbody[:300])
    # What a reader sees is what was last copied, never a copy it made.
    assert c.run(sb, ["sh", "-c", "echo three > /workspace/third"]).exit_code == 0
    st, _, rbody = r.request("GET", f"/v1/sandboxes/{sb}/diff")
    assert st == 200, rbody[:300]
    assert b"second" in rbody and b"third" not in rbody, "a reader's diff copied the layer"
