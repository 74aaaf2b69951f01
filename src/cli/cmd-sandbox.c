/* SPDX-License-Identifier: Apache-2.0 */
/* airlock create | ls | rm: a sandbox of airlockd's, made, listed and
 * destroyed through its API (apiclient.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apiclient.h"
#include "commands.h"
#include "util.h"

/* airlock create */

static const char create_usage[] =
    "Usage: airlock create [OPTIONS]\n"
    "\n"
    "Ask airlockd for a new sandbox and print its id. The sandbox lives until\n"
    "'airlock rm', its TTL or its idle timeout.\n"
    "\n"
    "Examples:\n"
    "  airlock create --class small\n"
    "  airlock create -w ~/src/project --review --ttl 3600\n"
    "  airlock create --meta owner=ci --json\n"
    "\n"
    "Options:\n"
    "      --class NAME          small, medium (default), large, xlarge\n"
    "      --tier NAME           isolation tier: namespace (default), container (with\n"
    "                            \"image\" in the policy), gvisor, microvm\n"
    "  -p, --policy FILE         a policy document (docs/policy.md)\n"
    "      --meta KEY=VALUE      a metadata entry (repeatable), for 'airlock ls --meta'\n"
    "      --ttl SECONDS         destroy it this long after its creation\n"
    "  -w, --workspace DIR       an existing host directory as its workspace (the grant\n"
    "                            must allow it); default: a new empty one\n"
    "      --review              mount the workspace copy-on-write; its changes wait\n"
    "                            for POST .../accept (docs/api.md)\n"
    "\n"
    "More options:\n"
    "      --idle-timeout SEC    destroy it after this long without a request\n"
    "      --repo URL            the daemon clones URL on the host as the workspace\n"
    "      --rev REV             the branch, tag or commit of --repo to check out\n"
    "      --json                print the whole record\n";

int cmd_create(int argc, char **argv)
{
        enum { O_CLASS = 1, O_META, O_TTL, O_IDLE, O_JSON, O_REVIEW, O_REPO, O_REV, O_TIER };
        static const struct option opts[] = {
            {"class", required_argument, NULL, O_CLASS},
            {"tier", required_argument, NULL, O_TIER},
            {"policy", required_argument, NULL, 'p'},
            {"meta", required_argument, NULL, O_META},
            {"ttl", required_argument, NULL, O_TTL},
            {"idle-timeout", required_argument, NULL, O_IDLE},
            {"workspace", required_argument, NULL, 'w'},
            {"json", no_argument, NULL, O_JSON},
            {"review", no_argument, NULL, O_REVIEW},
            {"repo", required_argument, NULL, O_REPO},
            {"rev", required_argument, NULL, O_REV},
            API_COMMON_OPTIONS,
            {NULL, 0, NULL, 0},
        };
        struct api_common co = {0};
        json_t *body = json_object();
        json_t *meta = json_object();
        _cleanup_free_ char *text = NULL, *resp = NULL;
        bool json_out = false;
        int c, ret = EXIT_USAGE;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "p:w:h", opts, NULL)) != -1) {
                if (api_common_opt(c, &co))
                        continue;
                double sec;
                switch (c) {
                case O_CLASS:
                        json_object_set_new(body, "class", json_string(optarg));
                        break;
                case O_TIER:
                        json_object_set_new(body, "tier", json_string(optarg));
                        break;
                case 'p': {
                        _cleanup_free_ char *doc = NULL;
                        int r = read_file_at(AT_FDCWD, optarg, 1 << 20, &doc, NULL);
                        json_error_t jerr;
                        json_t *pol = r < 0 ? NULL : json_loads(doc, 0, &jerr);
                        if (r < 0) {
                                fprintf(stderr, "airlock: create: %s: %s\n", optarg, strerror(-r));
                                goto out;
                        }
                        if (!pol) {
                                fprintf(stderr, "airlock: create: %s:%d:%d: %s\n", optarg,
                                        jerr.line, jerr.column, jerr.text);
                                goto out;
                        }
                        json_object_set_new(body, "policy", pol);
                        break;
                }
                case O_META: {
                        const char *eq = strchr(optarg, '=');
                        if (!eq || eq == optarg) {
                                fprintf(stderr,
                                        "airlock: create: --meta \"%s\": expected KEY=VALUE\n",
                                        optarg);
                                goto out;
                        }
                        _cleanup_free_ char *k = xasprintf("%.*s", (int)(eq - optarg), optarg);
                        json_object_set_new(meta, k, json_string(eq + 1));
                        break;
                }
                case O_TTL:
                case O_IDLE:
                        if (api_parse_seconds(optarg, &sec) < 0) {
                                fprintf(stderr,
                                        "airlock: create: \"%s\": expected seconds (30, 5m, 1h)\n",
                                        optarg);
                                goto out;
                        }
                        json_object_set_new(body, c == O_TTL ? "ttl" : "idleTimeout",
                                            json_real(sec));
                        break;
                case 'w': {
                        char real[PATH_MAX];
                        if (!realpath(optarg, real)) {
                                fprintf(stderr, "airlock: create: workspace %s: %s\n", optarg,
                                        strerror(errno));
                                goto out;
                        }
                        json_object_set_new(body, "workspace", json_string(real));
                        break;
                }
                case O_JSON:
                        json_out = true;
                        break;
                case O_REVIEW:
                        json_object_set_new(body, "review", json_true());
                        break;
                case O_REPO:
                case O_REV:
                        json_object_set_new(body, c == O_REPO ? "repo" : "rev",
                                            json_string(optarg));
                        break;
                case 'h':
                        api_print_help(create_usage, "create");
                        ret = 0;
                        goto out;
                default:
                        ret = api_bad_option("create", argv);
                        goto out;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: create: unexpected argument \"%s\"\n", argv[optind]);
                goto out;
        }
        if (json_object_size(meta))
                json_object_set(body, "metadata", meta);
        struct api_target t;
        ret = EXIT_FAIL;
        if (api_make_target("create", &co, &t) < 0)
                goto out;
        text = json_dumps(body, JSON_COMPACT);
        int status = api_call("create", &t, "POST", "/v1/sandboxes", "application/json", text,
                              strlen(text), &resp, NULL, true);
        if (status != 201)
                goto out;
        json_error_t jerr;
        json_t *o = json_loads(resp, 0, &jerr);
        const char *id = json_string_value(json_object_get(o, "id"));
        if (json_out)
                fputs(resp, stdout);
        else if (id)
                printf("%s\n", id);
        json_decref(o);
        ret = id ? 0 : EXIT_FAIL;
out:
        json_decref(meta);
        json_decref(body);
        return ret;
}

/* airlock ls */

static const char ls_usage[] =
    "Usage: airlock ls [OPTIONS]\n"
    "\n"
    "List the daemon's sandboxes, newest first.\n"
    "\n"
    "Examples:\n"
    "  airlock ls\n"
    "  airlock ls --state running\n"
    "  airlock ls --meta owner=ci --json\n"
    "\n"
    "Options:\n"
    "      --state STATE    only sandboxes in this state (starting, running, stopping,\n"
    "                       destroyed, failed)\n"
    "      --meta KEY=VALUE only sandboxes with this metadata (repeatable)\n"
    "      --limit N        at most N sandboxes (default: all, a page at a time)\n"
    "      --json           print the records as JSON\n";

int cmd_ls(int argc, char **argv)
{
        enum { O_STATE = 1, O_META, O_JSON, O_LIMIT };
        static const struct option opts[] = {
            {"state", required_argument, NULL, O_STATE},
            {"meta", required_argument, NULL, O_META},
            {"limit", required_argument, NULL, O_LIMIT},
            {"json", no_argument, NULL, O_JSON},
            API_COMMON_OPTIONS,
            {NULL, 0, NULL, 0},
        };
        struct api_common co = {0};
        _cleanup_free_ char *query = xstrdup("");
        bool json_out = false;
        uint64_t limit = 0; /* 0: all */
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (api_common_opt(c, &co))
                        continue;
                switch (c) {
                case O_STATE:
                case O_META: {
                        _cleanup_free_ char *param = NULL;
                        if (c == O_STATE) {
                                _cleanup_free_ char *v = api_url_escape(optarg);
                                param = xasprintf("state=%s", v);
                        } else {
                                const char *eq = strchr(optarg, '=');
                                if (!eq || eq == optarg) {
                                        fprintf(stderr,
                                                "airlock: ls: --meta \"%s\": expected KEY=VALUE\n",
                                                optarg);
                                        return EXIT_USAGE;
                                }
                                _cleanup_free_ char *k =
                                    xasprintf("%.*s", (int)(eq - optarg), optarg);
                                _cleanup_free_ char *ke = api_url_escape(k),
                                                    *ve = api_url_escape(eq + 1);
                                param = xasprintf("metadata.%s=%s", ke, ve);
                        }
                        char *q = xasprintf("%s%s%s", query, query[0] ? "&" : "?", param);
                        free(query);
                        query = q;
                        break;
                }
                case O_JSON:
                        json_out = true;
                        break;
                case O_LIMIT:
                        if (safe_atou64(optarg, &limit) < 0 || limit == 0 || limit > 1000000) {
                                fprintf(stderr,
                                        "airlock: ls: --limit \"%s\": expected a number from 1 "
                                        "to 1000000\n",
                                        optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'h':
                        api_print_help(ls_usage, "ls");
                        return 0;
                default:
                        return api_bad_option("ls", argv);
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: ls: unexpected argument \"%s\"\n", argv[optind]);
                return EXIT_USAGE;
        }
        struct api_target t;
        if (api_make_target("ls", &co, &t) < 0)
                return EXIT_FAIL;
        /* Page by page, each after the "next" token of the one before. */
        json_t *arr = json_array();
        _cleanup_free_ char *next = NULL;
        do {
                uint64_t want = limit ? limit - json_array_size(arr) : 1000;
                _cleanup_free_ char *tok = next ? api_url_escape(next) : NULL;
                _cleanup_free_ char *path = xasprintf(
                    "/v1/sandboxes%s%slimit=%" PRIu64 "%s%s", query, query[0] ? "&" : "?",
                    want > 1000 ? (uint64_t)1000 : want, tok ? "&next=" : "", tok ? tok : "");
                _cleanup_free_ char *resp = NULL;
                int status = api_call("ls", &t, "GET", path, NULL, NULL, 0, &resp, NULL, true);
                if (status != 200) {
                        json_decref(arr);
                        return EXIT_FAIL;
                }
                json_error_t jerr;
                json_t *page = json_loads(resp, 0, &jerr);
                json_array_extend(arr, json_object_get(page, "sandboxes"));
                free(next);
                const char *nt = json_string_value(json_object_get(page, "next"));
                next =
                    nt && json_array_size(json_object_get(page, "sandboxes")) ? xstrdup(nt) : NULL;
                json_decref(page);
        } while (next && (!limit || json_array_size(arr) < limit));
        json_t *o = json_pack("{s:o}", "sandboxes", arr);
        if (json_out) {
                char *text = json_dumps(arr ? arr : json_array(), JSON_INDENT(2));
                printf("%s\n", text ? text : "[]");
                free(text);
                json_decref(o);
                return 0;
        }
        printf("%-16s  %-9s  %-6s  %-9s  %-24s  %s\n", "ID", "STATE", "CLASS", "TIER", "CREATED",
               "METADATA");
        size_t i;
        json_t *sb;
        json_array_foreach(arr, i, sb)
        {
                _cleanup_free_ char *meta =
                    json_dumps(json_object_get(sb, "metadata"), JSON_COMPACT | JSON_SORT_KEYS);
                printf(
                    "%-16s  %-9s  %-6s  %-9s  %-24s  %s\n",
                    json_string_value(json_object_get(sb, "id")),
                    json_string_value(json_object_get(sb, "state")),
                    json_string_value(json_object_get(sb, "class")) ?: "-",
                    json_string_value(json_object_get(sb, "tier")) ?: "namespace",
                    json_string_value(json_object_get(sb, "createdAt")) ?: "-", meta ? meta : "{}");
        }
        json_decref(o);
        return 0;
}

static const char rm_usage[] =
    "Usage: airlock rm ID...\n"
    "\n"
    "Destroy sandboxes: their processes are killed, their daemon-made workspaces\n"
    "removed. Copy out what you need first ('airlock cp').\n"
    "\n"
    "Examples:\n"
    "  airlock rm 3f2a\n"
    "  airlock rm 3f2a 9c1b\n"
    "  airlock cp 3f2a:report.md . && airlock rm 3f2a\n";

int cmd_rm(int argc, char **argv)
{
        struct api_common co = {0};
        int done = api_common_options_only("rm", rm_usage, argc, argv, &co);
        if (done >= 0)
                return done;
        if (optind >= argc) {
                fprintf(stderr, "airlock: rm: expected at least one sandbox ID\n");
                return EXIT_USAGE;
        }
        struct api_target t;
        if (api_make_target("rm", &co, &t) < 0)
                return EXIT_FAIL;
        int ret = 0;
        for (int i = optind; i < argc; i++) {
                if (!api_valid_id(argv[i])) {
                        fprintf(stderr, "airlock: rm: \"%s\" is not a sandbox ID\n", argv[i]);
                        ret = EXIT_FAIL;
                        continue;
                }
                _cleanup_free_ char *path = xasprintf("/v1/sandboxes/%s", argv[i]);
                if (api_call("rm", &t, "DELETE", path, NULL, NULL, 0, NULL, NULL, true) != 200)
                        ret = EXIT_FAIL;
        }
        return ret;
}

/* airlock logs */
