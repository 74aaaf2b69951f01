/* SPDX-License-Identifier: Apache-2.0 */
/* airlock doctor: which isolation tiers this host can run, and why not
 * (boundary/probe.h does the checking; this file only prints). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "commands.h"
#include "help.h"
#include "image.h"
#include "jsonout.h"
#include "microvm.h"
#include "probe.h"
#include "tier.h"
#include "util.h"

/* The namespace tier cannot run here. */
#define DOCTOR_UNAVAILABLE 1

static const char doctor_usage[] =
    "Usage: airlock doctor [--workspace DIR] [--json]\n"
    "\n"
    "Say which isolation tiers this host can run and, for each failed check, why\n"
    "and the fix: user namespaces, cgroups, Landlock and seccomp for every tier;\n"
    "images (container); runsc (gvisor); KVM, QEMU and the guest kernel\n"
    "(microvm). With --workspace, also whether limits.workspaceDisk and\n"
    "limits.io can be had there. Last, host settings that cost start time\n"
    "(cgroup v1 without favordynmods). Run it as the user who will run Airlock.\n"
    "\n"
    "Exit status: 0 when the namespace tier works, 1 when it does not, 2 on bad\n"
    "usage.\n"
    "\n"
    "Examples:\n"
    "  airlock doctor\n"
    "  airlock doctor --workspace ~/src/project\n"
    "  airlock doctor --json\n"
    "\n"
    "Options:\n"
    "      --workspace DIR     also check the limits a workspace at DIR can have\n"
    "      --json              one JSON object on stdout instead of text\n";

struct tier {
        const char *name;
        bool built;
        const char *what;
        struct probe_check checks[8];
        size_t n;
        char why[512]; /* an unbuilt tier's reason (tier_available) */
};

/* The container tier's images: how many the cache holds for this caller. */
static void probe_images(struct probe_check *c)
{
        struct al_error err = {0};
        _cleanup_free_ char *dir = image_dir(geteuid(), getenv("HOME"));
        json_t *list = NULL;
        *c = (struct probe_check){.name = "images"};
        if (!dir || image_list(dir, &list, &err) < 0) {
                snprintf(c->detail, sizeof(c->detail), "the image cache cannot be read: %.400s",
                         dir ? err.msg : "no state directory ($HOME)");
                snprintf(c->fix, sizeof(c->fix), "set $HOME, or run as the user who runs Airlock");
                return;
        }
        size_t n = json_array_size(list);
        json_decref(list);
        c->ok = n > 0;
        snprintf(c->detail, sizeof(c->detail), "%zu image(s) in %.400s", n, dir);
        if (!n)
                snprintf(c->fix, sizeof(c->fix),
                         "import a root file system: airlock image import DIR --name NAME");
}

static bool tier_ok(const struct tier *t)
{
        if (!t->built)
                return false;
        for (size_t i = 0; i < t->n; i++)
                if (!t->checks[i].ok)
                        return false;
        return true;
}

static json_t *checks_json(const struct probe_check *c, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a,
                                      json_pack("{s:s, s:b, s:o, s:o}", "name", c[i].name, "ok",
                                                c[i].ok, "detail", json_text(c[i].detail), "fix",
                                                c[i].fix[0] ? json_text(c[i].fix) : json_null()));
        return a;
}

static void print_checks(const struct probe_check *c, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                printf("  %-4s %-13s %s\n", c[i].ok ? "ok" : "FAIL", c[i].name, c[i].detail);
                if (c[i].fix[0])
                        printf("       %-13s fix: %s\n", "", c[i].fix);
        }
}

int cmd_doctor(int argc, char **argv)
{
        enum { O_WORKSPACE = 256, O_JSON };
        static const struct option opts[] = {
            {"workspace", required_argument, NULL, O_WORKSPACE},
            {"json", no_argument, NULL, O_JSON},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char *workspace = NULL;
        bool json = false;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case O_WORKSPACE:
                        workspace = optarg;
                        break;
                case O_JSON:
                        json = true;
                        break;
                case 'h':
                        help_print(stdout, doctor_usage, "doctor");
                        return 0;
                default:
                        fprintf(stderr,
                                "airlock: doctor: unknown or incomplete option \"%s\" (see "
                                "--help)\n",
                                argv[optind - 1]);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: doctor: unexpected argument \"%s\" (see --help)\n",
                        argv[optind]);
                return 2;
        }
        struct stat st;
        if (workspace && stat(workspace, &st) < 0) {
                fprintf(stderr, "airlock: doctor: --workspace %s: %s\n", workspace,
                        strerror(errno));
                return 2;
        }
        if (workspace && !S_ISDIR(st.st_mode)) {
                fprintf(stderr, "airlock: doctor: --workspace %s: not a directory\n", workspace);
                return 2;
        }

        struct tier tiers[] = {
            {.name = "namespace",
             .built = true,
             .what = "namespaces, seccomp, Landlock and cgroups over the host's system "
                     "directories"},
            {.name = "container", .built = true, .what = "the namespace tier with an image's root"},
            {.name = "gvisor", .built = true, .what = "the same gates over gVisor's runsc"},
            {.name = "microvm",
             .built = true,
             .what = "its own kernel under QEMU, inside the namespace tier"},
        };
        struct tier *ns = &tiers[0];
        probe_userns(&ns->checks[ns->n++]);
        probe_cgroup(&ns->checks[ns->n++]);
        probe_landlock(&ns->checks[ns->n++]);
        probe_seccomp(&ns->checks[ns->n++]);
        for (size_t i = 0; i < ns->n; i++)
                tiers[1].checks[tiers[1].n++] = ns->checks[i];
        probe_images(&tiers[1].checks[tiers[1].n++]);
        for (size_t i = 0; i < ARRAY_SIZE(tiers); i++) {
                enum policy_tier pt;
                if (policy_tier_parse(tiers[i].name, &pt) == 0 &&
                    tier_available(pt, tiers[i].why, sizeof(tiers[i].why)) < 0)
                        tiers[i].built = false;
        }
        for (size_t i = 0; i < ns->n; i++)
                tiers[2].checks[tiers[2].n++] = ns->checks[i];
        probe_runsc(&tiers[2].checks[tiers[2].n++]);
        struct probe_check *kvm = &tiers[3].checks[tiers[3].n++];
        probe_kvm(kvm);
        /* With the operator's consent to emulation, no KVM is no failure. */
        enum tier_vm_accel accel;
        char accel_why[PROBE_TEXT_MAX];
        if (!kvm->ok && tier_microvm_host(&accel, accel_why, sizeof(accel_why)) == 0 &&
            accel == TIER_VM_ACCEL_TCG) {
                kvm->ok = true;
                size_t len = strlen(kvm->detail);
                snprintf(kvm->detail + len, sizeof(kvm->detail) - len,
                         "; QEMU emulates instead (%s=tcg)", TIER_MICROVM_ACCEL_ENV);
                kvm->fix[0] = '\0';
        }
        tier_microvm_probe(tiers[3].checks, &tiers[3].n);
        struct probe_check ws[2];
        if (workspace) {
                probe_workspace_quota(workspace, &ws[0]);
                probe_workspace_io(workspace, &ws[1]);
        }
        struct probe_check cost[1];
        probe_start_cost(&cost[0]);
        struct utsname u;
        if (uname(&u) < 0)
                snprintf(u.release, sizeof(u.release), "unknown");
        int rc = tier_ok(ns) ? 0 : DOCTOR_UNAVAILABLE;

        if (json) {
                json_t *a = json_array();
                for (size_t i = 0; i < ARRAY_SIZE(tiers); i++) {
                        const struct tier *t = &tiers[i];
                        json_array_append_new(
                            a, json_pack("{s:s, s:b, s:b, s:o, s:o}", "name", t->name, "built",
                                         t->built, "available", tier_ok(t), "why",
                                         t->built ? (tier_ok(t) ? json_null()
                                                                : json_string("a check failed"))
                                                  : json_string(t->why),
                                         "checks", checks_json(t->checks, t->n)));
                }
                json_t *o = json_pack("{s:i, s:s, s:o}", "uid", (int)geteuid(), "kernel", u.release,
                                      "tiers", a);
                json_object_set_new(o, "startTime", checks_json(cost, ARRAY_SIZE(cost)));
                if (workspace)
                        json_object_set_new(o, "workspace",
                                            json_pack("{s:o, s:o}", "path", json_text(workspace),
                                                      "checks", checks_json(ws, 2)));
                json_line(o);
                return rc;
        }
        printf("airlock doctor: uid %u, kernel %s\n", (unsigned)geteuid(), u.release);
        for (size_t i = 0; i < ARRAY_SIZE(tiers); i++) {
                const struct tier *t = &tiers[i];
                printf("\n%s tier (%s): %s\n", t->name, t->what,
                       !t->built    ? t->why
                       : tier_ok(t) ? "available"
                                    : "NOT available");
                print_checks(t->checks, t->n);
        }
        if (workspace) {
                printf("\nworkspace %s:\n", workspace);
                print_checks(ws, 2);
        }
        printf("\nstart time (host settings that slow every start, not whether it runs):\n");
        for (size_t i = 0; i < ARRAY_SIZE(cost); i++) {
                printf("  %-4s %-13s %s\n", cost[i].ok ? "ok" : "slow", cost[i].name,
                       cost[i].detail);
                if (cost[i].fix[0])
                        printf("       %-13s fix: %s\n", "", cost[i].fix);
        }
        return rc;
}
