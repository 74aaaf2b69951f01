/* SPDX-License-Identifier: Apache-2.0 */
/* airlock cp: one file between the host and a workspace of airlockd's,
 * through its API (apiclient.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apiclient.h"
#include "commands.h"
#include "gitops.h"
#include "util.h"

#define FILE_MAX (16u << 20) /* the API's limit per file */

/* airlock cp */

static const char cp_usage[] =
    "Usage: airlock cp SRC DST\n"
    "\n"
    "Copy one file between the host and a sandbox's workspace. One of SRC and DST\n"
    "is ID:PATH, PATH being relative to the workspace or under /workspace; the\n"
    "other is a local path, or - for stdin or stdout. Files are at most 16 MiB;\n"
    "missing directories in the sandbox are created. Symbolic links are not\n"
    "followed out of the workspace, nor at all when writing.\n"
    "\n"
    "Examples:\n"
    "  airlock cp input.csv 3f2a:data/input.csv\n"
    "  airlock cp 3f2a:out/result.json .\n"
    "  echo hi | airlock cp - 3f2a:hello.txt\n";

static bool split_remote(const char *arg, char id[17], const char **path)
{
        const char *colon = strchr(arg, ':');
        if (!colon || colon - arg != 16)
                return false;
        memcpy(id, arg, 16);
        id[16] = '\0';
        if (!api_valid_id(id))
                return false;
        *path = colon + 1;
        return true;
}

int cmd_cp(int argc, char **argv)
{
        struct api_common co = {0};
        int done = api_common_options_only("cp", cp_usage, argc, argv, &co);
        if (done >= 0)
                return done;
        if (argc - optind != 2) {
                fprintf(stderr, "airlock: cp: expected SRC and DST (see 'airlock cp --help')\n");
                return EXIT_USAGE;
        }
        const char *src = argv[optind], *dst = argv[optind + 1];
        char sid[17], did[17];
        const char *spath = NULL, *dpath = NULL;
        bool sremote = split_remote(src, sid, &spath), dremote = split_remote(dst, did, &dpath);
        if (sremote == dremote) {
                fprintf(stderr, "airlock: cp: exactly one of SRC and DST must be ID:PATH\n");
                return EXIT_USAGE;
        }
        struct api_target t;
        if (api_make_target("cp", &co, &t) < 0)
                return EXIT_FAIL;
        if (dremote) {
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                int r = read_file_at(AT_FDCWD, STREQ(src, "-") ? "/dev/stdin" : src, FILE_MAX,
                                     &data, &len);
                if (r < 0) {
                        fprintf(stderr, "airlock: cp: %s: %s%s\n", src, strerror(-r),
                                r == -EFBIG ? " (at most 16 MiB)" : "");
                        return EXIT_FAIL;
                }
                _cleanup_free_ char *q = api_url_escape(dpath);
                _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/files?path=%s", did, q);
                int status = api_call("cp", &t, "PUT", path, "application/octet-stream", data, len,
                                      NULL, NULL, true);
                return status == 200 ? 0 : EXIT_FAIL;
        }
        _cleanup_free_ char *q = api_url_escape(spath);
        _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s/files?path=%s", sid, q);
        _cleanup_free_ char *resp = NULL;
        size_t len = 0;
        int status = api_call("cp", &t, "GET", path, NULL, NULL, 0, &resp, &len, true);
        if (status != 200)
                return EXIT_FAIL;
        if (STREQ(dst, "-") && isatty(STDOUT_FILENO) == 1) {
                /* The agent's bytes must not drive the user's terminal (a
                 * title, the clipboard, a query answered into the input):
                 * shown escaped, as export and diff show them. */
                _cleanup_free_ char *esc = gitops_escape(resp, len, true);
                return write_full(1, esc, strlen(esc)) < 0 ? EXIT_FAIL : 0;
        }
        if (STREQ(dst, "-"))
                return write_full(1, resp, len) < 0 ? EXIT_FAIL : 0;
        /* Into a directory: under the remote file's own name. */
        _cleanup_free_ char *into = NULL;
        struct stat st;
        if (stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
                const char *slash = strrchr(spath, '/');
                const char *name = slash ? slash + 1 : spath;
                if (!*name || STREQ(name, ".") || STREQ(name, "..")) {
                        fprintf(stderr,
                                "airlock: cp: %s is a directory and %s names no file to put in "
                                "it; give the destination file's name\n",
                                dst, spath);
                        return EXIT_USAGE;
                }
                into = xasprintf("%s/%s", dst, name);
                dst = into;
        }
        _cleanup_close_ int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write_full(fd, resp, len) < 0) {
                fprintf(stderr, "airlock: cp: %s: %s\n", dst, strerror(errno));
                return EXIT_FAIL;
        }
        return 0;
}

/* airlock rm */
