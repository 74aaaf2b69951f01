/* SPDX-License-Identifier: Apache-2.0 */
/* airlock image import|ls|rm: the container tier's images (image.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "gitops.h"
#include "help.h"
#include "image.h"
#include "util.h"

static const char image_usage[] =
    "Usage: airlock image import|ls|rm [ARGS]\n"
    "\n"
    "Root file systems for the container tier, kept once each in a\n"
    "content-addressed cache under Airlock's state (docs/tiers.md).\n"
    "\n"
    "Examples:\n"
    "  airlock image import ./rootfs --name debian\n"
    "  airlock run --tier container --image debian -w . -- cat /etc/os-release\n"
    "  airlock image ls\n"
    "\n"
    "Commands:\n"
    "  import SRC [--name NAME]    unpack SRC into the cache and print its id\n"
    "  ls [--json]                 the images: id and names\n"
    "  rm NAME|ID...               remove a name (the tree goes with its last\n"
    "                              name), or an image by id with all its names\n"
    "\n"
    "More options and details:\n"
    "  SRC is a directory, an OCI image layout (a directory or a tar of one), a\n"
    "  docker-archive tarball ('docker save') or a tarball of a root file system.\n"
    "  The cache is /var/lib/airlock/images (root) or\n"
    "  ~/.local/state/airlock/images. A sandbox shows the image read-only, nosuid\n"
    "  and nodev instead of the host's system directories. Importing follows no\n"
    "  link and lets no path leave the cache: absolute or \"..\" names are\n"
    "  refused, layers' whiteouts applied, device nodes, FIFOs and sockets left\n"
    "  out, set-id and sticky bits cleared, hard links copied from inside the\n"
    "  image (one pointing out is refused), OCI blobs checked against their\n"
    "  digests.\n"
    "\n"
    "Exit status: 0; 2 usage; 3 no such image; 1 otherwise.\n";

static int fail(const struct al_error *err)
{
        /* The message may name an image's entries: a hostile image's bytes,
         * shown escaped so that they cannot drive the terminal. */
        _cleanup_free_ char *msg = gitops_escape(err->msg, strlen(err->msg), false);
        fprintf(stderr, "airlock: image: %s\n", msg);
        return err->code == ENOENT ? 3 : err->code == EINVAL ? 2 : 1;
}

static char *cache_dir(void)
{
        char *d = image_dir(geteuid(), getenv("HOME"));
        if (!d)
                fprintf(stderr, "airlock: image: no state directory ($HOME is not set or not "
                                "absolute)\n");
        return d;
}

int cmd_image(int argc, char **argv)
{
        struct al_error err = {0};
        if (argc < 2 || STREQ(argv[1], "--help") || STREQ(argv[1], "-h")) {
                help_print(argc < 2 ? stderr : stdout, image_usage, "image");
                return argc < 2 ? 2 : 0;
        }
        const char *sub = argv[1];
        _cleanup_free_ char *dir = cache_dir();
        if (!dir)
                return 1;
        if (STREQ(sub, "import")) {
                const char *src = NULL, *name = NULL;
                for (int i = 2; i < argc; i++) {
                        if (STREQ(argv[i], "--name") && i + 1 < argc)
                                name = argv[++i];
                        else if (strncmp(argv[i], "--name=", 7) == 0)
                                name = argv[i] + 7;
                        else if (argv[i][0] != '-' && !src)
                                src = argv[i];
                        else {
                                fprintf(stderr,
                                        "airlock: image import: unexpected \"%s\" (usage: "
                                        "airlock image import SRC [--name NAME])\n",
                                        argv[i]);
                                return 2;
                        }
                }
                if (!src) {
                        fprintf(stderr, "airlock: image import: no SRC given (usage: airlock "
                                        "image import SRC [--name NAME])\n");
                        return 2;
                }
                struct image_info info = {0};
                if (image_import(dir, src, name, &info, &err) < 0)
                        return fail(&err);
                printf("%s\n", info.id);
                fprintf(stderr,
                        "airlock: image %s%s%s: %" PRIu64 " files, %" PRIu64
                        " directories, %" PRIu64 " links, %" PRIu64 " bytes%s",
                        info.id, name ? " as " : "", name ? name : "", info.files, info.dirs,
                        info.links, info.bytes, info.cached ? " (already in the cache)" : "");
                if (info.skipped)
                        fprintf(stderr, "; %" PRIu64 " device nodes, FIFOs or sockets left out",
                                info.skipped);
                if (info.whiteouts)
                        fprintf(stderr, "; %" PRIu64 " whiteouts applied", info.whiteouts);
                if (info.setid_stripped)
                        fprintf(stderr, "; %" PRIu64 " set-id or sticky bits cleared",
                                info.setid_stripped);
                fputc('\n', stderr);
                return 0;
        }
        if (STREQ(sub, "ls")) {
                bool json = argc == 3 && STREQ(argv[2], "--json");
                if (argc > 2 && !json) {
                        fprintf(stderr, "airlock: image ls: unexpected \"%s\"\n", argv[2]);
                        return 2;
                }
                json_t *list = NULL;
                if (image_list(dir, &list, &err) < 0)
                        return fail(&err);
                if (json) {
                        char *s = json_dumps(list, JSON_INDENT(2));
                        puts(s ? s : "[]");
                        free(s);
                } else {
                        printf("%-64s %s\n", "ID", "NAMES");
                        size_t i, j;
                        json_t *v, *n;
                        json_array_foreach(list, i, v)
                        {
                                printf("%-64s ", json_string_value(json_object_get(v, "id")));
                                json_t *names = json_object_get(v, "names");
                                if (json_array_size(names) == 0)
                                        fputs("-", stdout);
                                json_array_foreach(names, j, n)
                                    printf("%s%s", j ? "," : "", json_string_value(n));
                                fputc('\n', stdout);
                        }
                }
                json_decref(list);
                return 0;
        }
        if (STREQ(sub, "rm")) {
                if (argc < 3) {
                        fprintf(stderr, "airlock: image rm: no NAME or ID given\n");
                        return 2;
                }
                int rc = 0;
                for (int i = 2; i < argc; i++) {
                        err = (struct al_error){0};
                        if (image_remove(dir, argv[i], &err) < 0)
                                rc = fail(&err);
                }
                return rc;
        }
        fprintf(stderr, "airlock: image: unknown subcommand \"%s\" (import, ls, rm)\n", sub);
        return 2;
}
