/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "githelper.h"
#include "help.h"

static int tools_export(int argc, char **argv)
{
        return githelper_exec("export", argc, argv);
}

static int tools_push(int argc, char **argv)
{
        return githelper_exec("push", argc, argv);
}

static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *help;
} commands[] = {
        {"run", cmd_run, "run a command in a new sandbox"},
        {"audit", cmd_audit, "verify or show an audit log"},
        {"diff", cmd_diff, "show what a review sandbox changed"},
        {"accept", cmd_accept, "apply a review sandbox's changes to its workspace"},
        {"discard", cmd_discard, "drop a review sandbox's changes"},
        {"review", cmd_review, "list the review sandboxes whose changes are pending (review ls)"},
        {"export", tools_export, "write a sandbox's new commits as patches (mbox)"},
        {"push", tools_push, "push a sandbox's new commits to a new branch"},
        {"supervise", cmd_supervise, "run one long-lived sandbox (used by airlockd)"},
        {"create", cmd_create, "ask airlockd for a sandbox"},
        {"ls", cmd_ls, "list airlockd's sandboxes"},
        {"exec", cmd_exec, "run a command in one of airlockd's sandboxes"},
        {"cp", cmd_cp, "copy a file into or out of a sandbox's workspace"},
        {"rm", cmd_rm, "destroy airlockd's sandboxes"},
        {"logs", cmd_logs, "show a sandbox's audit lines or a process's output"},
        {"attach", cmd_attach, "join this terminal to a sandbox process's terminal"},
        {"grant", cmd_grant, "manage the tokens airlockd accepts"},
        {"gc", cmd_gc, "remove records and reviewed changes past their retention"},
        {"doctor", cmd_doctor, "say which isolation tiers this host can run, and why not"},
        {"volume", cmd_volume, "list, create, remove named volumes (--home, --volume)"},
        {"image", cmd_image, "import, list, remove the container tier's images"},
        {"stop", cmd_stop, "the kill switch: freeze, then kill and destroy sandboxes"},
        {"ui", cmd_ui, "log a browser into airlockd's dashboard (a one-time address)"},
        {"caps", cmd_caps, "show or change what a running sandbox may do"},
        {"estop", cmd_estop, "the hardware's emergency stop: every actuator stopped"},
        {"approvals", cmd_approvals, "list and decide the requests sandboxes ask the operator"},
        {"agent", cmd_agent, "run a task with the model on the host, the sandbox as its hands"},
};

static void usage(FILE *f)
{
        fputs("Usage: airlock COMMAND [OPTIONS]\n"
              "\n"
              "Run AI agents under hard isolation.\n"
              "\n"
              "Examples:\n"
              "  airlock run -w ~/src/project -- ./agent.sh\n"
              "  airlock run --review -w . -- ./agent.sh\n"
              "  airlock run -w . --allow api.example.com -- python3 agent.py\n"
              "\n"
              "Commands:\n",
              f);
        if (help_full())
                for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
        else
                fputs("  run       run a command in a new sandbox\n"
                      "  audit     verify or show an audit log\n"
                      "  review ls, diff, accept, discard   review what a --review sandbox changed\n"
                      "  export, push              take the commits of a --repo sandbox\n"
                      "  create, ls, exec, cp, rm, logs   use airlockd's sandboxes\n"
                      "  grant     manage the tokens airlockd accepts\n"
                      "  gc        remove records and reviewed changes past their retention\n"
                      "  doctor    say which isolation tiers this host can run, and why not\n"
                      "  volume    named volumes for 'run --home' and '--volume'\n"
                      "  image     images for 'run --tier container --image NAME'\n"
                      "  supervise run one long-lived sandbox (used by airlockd)\n",
                      f);
        fputs("\nA command's options: 'airlock COMMAND --help', all of them: 'airlock help "
              "COMMAND'.\nManual: 'man airlock', 'man airlock-COMMAND'.\n",
              f);
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        /* airlock help CMD: the command's whole help, as its man page has it. */
        if (strcmp(argv[1], "help") == 0 && argc > 2) {
                char *help_argv[] = {argv[2], "--help", NULL};
                setenv("AIRLOCK_HELP", "full", 1);
                for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                        if (strcmp(argv[2], commands[i].name) == 0)
                                return commands[i].fn(2, help_argv);
                fprintf(stderr, "airlock: help: unknown command \"%s\" (see 'airlock --help')\n",
                        argv[2]);
                return 2;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
            strcmp(argv[1], "help") == 0) {
                usage(stdout);
                return 0;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("airlock 0.1.0\n");
                return 0;
        }
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(argv[1], commands[i].name) == 0)
                        return commands[i].fn(argc - 1, argv + 1);
        fprintf(stderr, "airlock: unknown command \"%s\" (see 'airlock --help')\n", argv[1]);
        return 2;
}
