#!/bin/sh
# Run a command as an ordinary user inside a cgroup delegated to that user,
# as a login manager would: the user owns the leaf in each hierarchy and so
# may create the sandbox's cgroup beneath it. Needs root.
set -eu
user=$1
shift
uid=$(id -u "$user")

if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        # cgroup v2: a leaf for this process and a sibling the user owns.
        cur=$(sed -n 's/^0:://p' /proc/self/cgroup)
        dir=/sys/fs/cgroup${cur%/}/airlock-user-$uid.$$
        mkdir -p "$dir"
        chown -R "$user" "$dir"
        echo $$ >"$dir/cgroup.procs"
else
        for c in memory pids cpu cpuacct; do
                cur=$(awk -F: -v c="$c" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup)
                dir=/sys/fs/cgroup/$c${cur%/}/airlock-user-$uid
                mkdir -p "$dir"
                chown "$user" "$dir" "$dir/cgroup.procs" "$dir/tasks"
                echo $$ >"$dir/cgroup.procs"
        done
fi
# The sanitizers' settings and a test's own TMPDIR go along; nothing else of
# the environment does.
exec setpriv --reuid="$user" --regid="$user" --init-groups --reset-env -- \
        env ${ASAN_OPTIONS:+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS:+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
        ${LSAN_OPTIONS:+LSAN_OPTIONS="$LSAN_OPTIONS"} ${TMPDIR:+TMPDIR="$TMPDIR"} "$@"
