#!/bin/sh
# make bench: every benchmark, each a ratio against a reference in the same run.
set -eu
cd "$(dirname "$0")"
/usr/bin/python3 spawn.py
/usr/bin/python3 netgate.py
/usr/bin/python3 transparent.py
/usr/bin/python3 daemon.py
/usr/bin/python3 density.py
/usr/bin/python3 toolgate.py
/usr/bin/python3 tiers.py
../build/bench/bench-audit-append
