/* SPDX-License-Identifier: Apache-2.0 */
/* `airlock-tool hw`: the hardware gate's calls (docs/hardware.md) through
 * the tool gateway: hw.ls, hw.set, hw.read, hw.stop. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool.h"

static const char hw_usage[] =
    "Usage: airlock-tool hw ls [--json] | set NAME VALUE | read NAME | stop\n"
    "\n"
    "Drive the host's device through Airlock's hardware gate: actuators on the\n"
    "policy's allow-list, sensors not on its deny-list, every value clamped to\n"
    "maxSpeed and ramped at maxAcceleration, every command audited.\n"
    "\n"
    "  ls [--json]     the devices and what this sandbox may do with them\n"
    "  set NAME VALUE  set an actuator (prints what it was clamped to)\n"
    "  read NAME       read a sensor (prints its value as JSON)\n"
    "  stop            stop every actuator now; never refused, never limited\n"
    "\n"
    "Exit status as for `airlock-tool call` (3: denied, 4: bad value, 5: rate).\n";

static int hw_request(const char *tool, json_t *args, json_t **ret_value)
{
        struct tool_client c;
        char err[512];
        if (tool_client_open(&c, err, sizeof(err)) < 0) {
                fprintf(stderr, "airlock-tool: %s\n", err);
                json_decref(args);
                return TOOL_EXIT_CLIENT;
        }
        json_t *req = json_pack("{s:s, s:o}", "tool", tool, "args", args ? args : json_object());
        json_t *resp = tool_client_request(&c, req, err, sizeof(err));
        tool_client_close(&c);
        if (!resp) {
                fprintf(stderr, "airlock-tool: %s\n", err);
                return TOOL_EXIT_CLIENT;
        }
        if (!json_is_true(json_object_get(resp, "ok"))) {
                const char *code = json_string_value(json_object_get(resp, "errorCode"));
                const char *msg = json_string_value(json_object_get(resp, "safeMessage"));
                fprintf(stderr, "airlock-tool: %s: %s%s%s\n", tool, code ? code : "error",
                        msg ? ": " : "", msg ? msg : "");
                int ex = tool_exit_code(code);
                json_decref(resp);
                return ex;
        }
        *ret_value = json_incref(json_object_get(resp, "value"));
        json_decref(resp);
        return 0;
}

static void print_json(const json_t *v)
{
        json_dumpf(v, stdout, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
        putchar('\n');
}

/* A number as the shell gave it, else the text itself: the gate refuses
 * what is not a finite number, and records what it refused. */
static json_t *value_of(const char *s)
{
        char *end = NULL;
        errno = 0;
        double d = strtod(s, &end);
        if (*s && end && *end == '\0' && errno == 0 && isfinite(d))
                return json_real(d);
        return json_string(s);
}

int tool_hw_main(int argc, char **argv)
{
        json_t *v = NULL;
        int ex;
        if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
                fputs(hw_usage, argc < 1 ? stderr : stdout);
                return argc < 1 ? TOOL_EXIT_USAGE : 0;
        }
        const char *cmd = argv[0];
        if (strcmp(cmd, "ls") == 0 && (argc == 1 || (argc == 2 && !strcmp(argv[1], "--json")))) {
                ex = hw_request("hw.ls", NULL, &v);
                if (ex)
                        return ex;
                if (argc == 2)
                        print_json(v);
                else {
                        size_t i;
                        json_t *d;
                        printf("%-20s %-9s %-8s %s\n", "NAME", "KIND", "ALLOWED", "LIMITS");
                        json_array_foreach(v, i, d)
                        {
                                json_t *ms = json_object_get(d, "maxSpeed");
                                json_t *ma = json_object_get(d, "maxAcceleration");
                                char lim[96] = "";
                                if (ms)
                                        snprintf(lim, sizeof(lim), "maxSpeed %g%s%g%s",
                                                 json_number_value(ms),
                                                 ma ? ", maxAcceleration " : "",
                                                 ma ? json_number_value(ma) : 0.0, ma ? "/s" : "");
                                printf("%-20s %-9s %-8s %s\n",
                                       json_string_value(json_object_get(d, "name")),
                                       json_string_value(json_object_get(d, "kind")),
                                       json_is_true(json_object_get(d, "allowed")) ? "yes" : "no",
                                       lim);
                        }
                }
        } else if (strcmp(cmd, "set") == 0 && argc == 3) {
                ex = hw_request(
                    "hw.set", json_pack("{s:s, s:o}", "name", argv[1], "value", value_of(argv[2])),
                    &v);
                if (ex)
                        return ex;
                print_json(v);
        } else if (strcmp(cmd, "read") == 0 && argc == 2) {
                ex = hw_request("hw.read", json_pack("{s:s}", "name", argv[1]), &v);
                if (ex)
                        return ex;
                print_json(json_object_get(v, "value"));
        } else if (strcmp(cmd, "stop") == 0 && argc == 1) {
                ex = hw_request("hw.stop", NULL, &v);
                if (ex)
                        return ex;
                print_json(v);
        } else {
                fputs(hw_usage, stderr);
                return TOOL_EXIT_USAGE;
        }
        json_decref(v);
        return fflush(stdout) == 0 ? 0 : TOOL_EXIT_CLIENT;
}
