/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* A sandbox's root given as a directory: the container tier's image
 * (tier.h) and airlock-runtime's bundle root (spawn_config.rootfs) are one
 * engine. The parent lists the directory's top-level entries as the caller
 * (the sandbox user need not reach it) and, for a root caller, clones each
 * (detached, recursive, nosuid, nodev, read-only when asked); the child
 * binds each in place on the new root (root.c), recreates links as links
 * (resolved inside the sandbox only), and makes /etc when there is none.
 * Directories, regular files and links only: a socket, fifo or device at
 * the top is left out. Entries the sandbox gets fresh or never sees (proc,
 * dev, sys, tmp, run, root, workspace, and per kind below) are left out. */

enum rootdir_kind {
        /* Airlock's image cache (the container tier): always read-only,
         * shown at the image's paths without the deny list's check (the
         * state directory it lies in is on that list); home is fresh. */
        ROOTDIR_IMAGE,
        /* A bundle's root (airlock-runtime): a host path like any other,
         * checked against the deny list; read-only when the spec says. */
        ROOTDIR_BUNDLE,
};

enum { ROOTDIR_ENTRIES_MAX = 1024 };

struct rootdir_entry {
        char *name;
        char *link; /* a symbolic link's text, or NULL */
        int mnt;    /* a detached clone (root caller), or -1: bound by path */
};

struct rootdir {
        enum rootdir_kind kind;
        char *path;
        bool readonly;
        struct rootdir_entry *entries;
        size_t n_entries;
        /* etc/resolv.conf is a regular file there, so that a gated
         * sandbox's resolver can be mounted over it. */
        bool resolv_file;
};

int rootdir_list(const char *path, enum rootdir_kind kind, bool readonly, struct rootdir **ret,
                 struct al_error *err);
struct rootdir *rootdir_free(struct rootdir *rd);
