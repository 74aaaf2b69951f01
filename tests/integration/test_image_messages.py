# SPDX-License-Identifier: Apache-2.0
"""A hostile image's names reach the user's terminal only escaped: `airlock
image import` refusing an entry names it, and a name with escape sequences
(a title, the clipboard through OSC 52) must not drive the terminal."""

import tarfile

from tierlib import tar_layer

EVIL = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2Jh\x9b"


def test_refused_entry_names_are_escaped(airlock):
    d = airlock.make_dir("evil-names")
    (d / "l.tar").write_bytes(tar_layer([{"name": EVIL, "type": tarfile.LNKTYPE,
                                          "link": EVIL + "missing"}]))
    airlock.chown(d)
    p = airlock.run(["image", "import", d / "l.tar", "--name", "evil-names"],
                    check_setup=False, timeout=30)
    assert p.returncode != 0, p.stderr
    assert "hard link" in p.stderr, p.stderr
    assert "\x1b" not in p.stderr and "\x07" not in p.stderr and "\x9b" not in p.stderr, \
        repr(p.stderr)
