# SPDX-License-Identifier: Apache-2.0
"""Names from the host workspace in review's error messages.

A name in the workspace may hold any byte but / and NUL, and whoever can
write there (the workspace's owner, when root reviews for them) chooses
it. Accept and diff name workspace entries in their errors ("X changed on
the host since the sandbox started"); printed as they were, an escape
sequence in such a name drove the reviewer's terminal, and a newline forged
a line of Airlock's own. The messages show control characters in caret
notation, as the diff does on a terminal."""

from test_review_attacks2 import _run_review

NAME = "a\x1b]0;pwned\x07\nairlock: accepted everything"


def test_a_host_name_in_an_error_is_shown_escaped(root_airlock):
    ws = root_airlock.make_dir()
    (ws / "d").mkdir()
    (ws / "d" / NAME).write_text("host\n")
    sid = _run_review(root_airlock, ws, "rm -rf d")
    # The host changes it after the start: accept refuses, naming it.
    (ws / "d" / NAME).write_text("changed\n")
    p = root_airlock.run(["accept", sid], timeout=30, check_setup=False)
    assert p.returncode != 0, p.stdout + p.stderr
    assert "changed on the host" in p.stderr, p.stderr
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr, repr(p.stderr)
    assert p.stderr.count("\n") == 1, repr(p.stderr)
    assert "^[]0;pwned^G^Jairlock: accepted everything" in p.stderr, repr(p.stderr)
