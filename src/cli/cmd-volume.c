/* SPDX-License-Identifier: Apache-2.0 */
/* airlock volume ls|create|rm|du: the named volumes of this user's state
 * (volume.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "help.h"
#include "util.h"
#include "volume.h"

static const char volume_usage[] =
    "Usage: airlock volume ls|create|rm|du [ARGS]\n"
    "\n"
    "Named volumes kept in Airlock's state, mounted nosuid,nodev by 'airlock run\n"
    "--home NAME' (as $HOME) or '--volume NAME:/PATH[:ro]'. Read-write by one sandbox\n"
    "at a time, read-only by many. Root's (/var/lib/airlock/volumes) are ext4 file\n"
    "systems of a fixed size; an ordinary user's (~/.local/state/airlock/volumes) are\n"
    "directories given to the sandbox as a tmpfs of the volume's size and saved back\n"
    "when it ends (a sandbox killed with its supervisor loses what it wrote).\n"
    "\n"
    "Examples:\n"
    "  airlock volume create agent-home --size 2G\n"
    "  airlock run --home agent-home -w . -- claude\n"
    "  airlock volume ls\n"
    "\n"
    "Commands:\n"
    "  ls [--json]                 name, size, host disk used, how attached\n"
    "  create NAME --size SIZE     a new volume of SIZE bytes (8M to 1T, e.g. 1G)\n"
    "  rm NAME...                  remove (refused while a sandbox has it)\n"
    "  du [NAME]                   host disk used by each volume, or by NAME\n"
    "\n"
    "Exit status: 0; 2 usage; 3 no such volume; 4 attached; 5 exists; 6 needs\n"
    "root; 1 otherwise.\n";

static void print_human(uint64_t v, char buf[32])
{
        static const char units[] = "BKMGT";
        double d = (double)v;
        size_t u = 0;
        while (d >= 1024 && u + 1 < sizeof(units) - 1) {
                d /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, 32, "%" PRIu64 "B", v);
        else
                snprintf(buf, 32, "%.1f%c", d, units[u]);
}

static int fail(const struct al_error *err)
{
        fprintf(stderr, "airlock: volume: %s\n", err->msg);
        switch (err->code) {
        case ENOENT:
                return 3;
        case EBUSY:
                return 4;
        case EEXIST:
                return 5;
        case EPERM:
                return 6;
        default:
                return 1;
        }
}

static void print_row(json_t *v, bool du)
{
        char size[32], used[32];
        print_human((uint64_t)json_integer_value(json_object_get(v, "size")), size);
        print_human((uint64_t)json_integer_value(json_object_get(v, "used")), used);
        const char *how = json_string_value(json_object_get(v, "attached"));
        if (du)
                printf("%-8s %s\n", used, json_string_value(json_object_get(v, "name")));
        else
                printf("%-24s %-8s %-8s %s\n", json_string_value(json_object_get(v, "name")), size,
                       used, how ? how : "-");
}

int cmd_volume(int argc, char **argv)
{
        struct al_error err = {0};
        if (argc < 2 || STREQ(argv[1], "--help") || STREQ(argv[1], "-h")) {
                help_print(argc < 2 ? stderr : stdout, volume_usage, "volume");
                return argc < 2 ? 2 : 0;
        }
        const char *sub = argv[1];
        if (STREQ(sub, "ls") || (STREQ(sub, "du") && argc == 2)) {
                bool json = argc == 3 && STREQ(argv[2], "--json");
                if (argc > 2 && !json) {
                        fprintf(stderr, "airlock: volume %s: unexpected \"%s\"\n", sub, argv[2]);
                        return 2;
                }
                json_t *list = NULL;
                if (volume_list(&list, &err) < 0)
                        return fail(&err);
                if (json) {
                        char *s = json_dumps(list, JSON_INDENT(2));
                        puts(s);
                        free(s);
                } else {
                        if (STREQ(sub, "ls"))
                                printf("%-24s %-8s %-8s %s\n", "NAME", "SIZE", "USED", "ATTACHED");
                        size_t i;
                        json_t *v;
                        json_array_foreach(list, i, v) print_row(v, STREQ(sub, "du"));
                }
                json_decref(list);
                return 0;
        }
        if (STREQ(sub, "du") && argc == 3) {
                json_t *v = NULL;
                if (volume_info(argv[2], &v, &err) < 0)
                        return fail(&err);
                print_row(v, true);
                json_decref(v);
                return 0;
        }
        if (STREQ(sub, "create")) {
                const char *name = NULL, *size_s = NULL;
                for (int i = 2; i < argc; i++) {
                        if (STREQ(argv[i], "--size") && i + 1 < argc)
                                size_s = argv[++i];
                        else if (strncmp(argv[i], "--size=", 7) == 0)
                                size_s = argv[i] + 7;
                        else if (argv[i][0] != '-' && !name)
                                name = argv[i];
                        else {
                                fprintf(stderr,
                                        "airlock: volume create: unexpected \"%s\" (usage: "
                                        "airlock volume create NAME --size SIZE)\n",
                                        argv[i]);
                                return 2;
                        }
                }
                uint64_t size = 0;
                if (!name || !size_s || parse_size(size_s, &size) < 0) {
                        fprintf(stderr,
                                "airlock: volume create: %s (usage: airlock volume "
                                "create NAME --size SIZE, e.g. --size 1G)\n",
                                !name     ? "no NAME given"
                                : !size_s ? "--size is required"
                                          : "--size: expected a size such as 512M or 1G");
                        return 2;
                }
                if (volume_create(name, size, NULL, &err) < 0)
                        return fail(&err);
                return 0;
        }
        if (STREQ(sub, "rm")) {
                if (argc < 3) {
                        fprintf(stderr, "airlock: volume rm: no NAME given\n");
                        return 2;
                }
                int rc = 0;
                for (int i = 2; i < argc; i++) {
                        err = (struct al_error){0};
                        if (volume_remove(argv[i], &err) < 0)
                                rc = fail(&err);
                }
                return rc;
        }
        fprintf(stderr, "airlock: volume: unknown subcommand \"%s\" (ls, create, rm, du)\n", sub);
        return 2;
}
