/* SPDX-License-Identifier: Apache-2.0 */
/* What a tool's argv template may run: a program named by an absolute path
 * that is neither a shell nor anything that runs a command line, and an
 * interpreter only with a script file, never a command string (its code
 * options, and an option's separate value, are told apart here). */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "policy-internal.h"
#include "schema.h"
#include "tools-internal.h"
#include "util.h"

/* Programs that run a command given in their arguments, or a command
 * string: with any of these as argv[0] a tool would be a shell. */
static const char *const shells[] = {
    "sh",      "bash",     "dash",    "zsh",    "ksh",         "mksh",   "pdksh",  "fish",
    "busybox", "env",      "csh",     "tcsh",   "rbash",       "ash",    "yash",   "xargs",
    "sudo",    "su",       "doas",    "nohup",  "nice",        "ionice", "setsid", "timeout",
    "stdbuf",  "chroot",   "flock",   "script", "watch",       "exec",   "eval",   "ssh",
    "unshare", "nsenter",  "runuser", "pkexec", "systemd-run", "strace", "ltrace", "gdb",
    "time",    "parallel", "expect",
};

/* Interpreters: allowed with a script file, never with a command string. */
static const char *const interpreters[] = {
    "python", "perl", "ruby",    "node",   "nodejs", "php",       "lua",     "luajit",
    "awk",    "gawk", "mawk",    "nawk",   "tclsh",  "wish",      "Rscript", "deno",
    "bun",    "pwsh", "guile",   "sed",    "jq",     "osascript", "java",    "jshell",
    "irb",    "erl",  "escript", "racket", "sbcl",
};

/* name, or name followed by a version: "python3", "python3.11", "bash5". */
static bool name_is(const char *base, const char *name)
{
        size_t n = strlen(name);
        if (strncmp(base, name, n) != 0)
                return false;
        return base[n + strspn(base + n, "0123456789.-")] == '\0';
}

static bool in_list(const char *base, const char *const *list, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (name_is(base, list[i]))
                        return true;
        return false;
}

/* A literal element that asks an interpreter to run its value as code:
 * -c, -e, -E, -r (php), a cluster holding one of them (-Bc, -pe), or a long
 * form (--eval, --command, --exec, --execute, --run, --expression). */
static bool is_code_option(const char *s)
{
        static const char *const longs[] = {"--eval", "--command",    "--exec",  "--execute",
                                            "--run",  "--expression", "--print", "--import"};
        if (s[0] != '-')
                return false;
        if (s[1] == '-') {
                for (size_t i = 0; i < ARRAY_SIZE(longs); i++)
                        if (strncmp(s, longs[i], strlen(longs[i])) == 0)
                                return true;
                return false;
        }
        for (const char *t = s + 1; *t; t++) {
                if (strchr("ceEr", *t))
                        return true;
                if (!((*t >= 'a' && *t <= 'z') || (*t >= 'A' && *t <= 'Z') ||
                      (*t >= '0' && *t <= '9')))
                        break;
        }
        return false;
}

/* Options that take the next element(s) as their value, per interpreter: that
 * value is not the script, so an argument after it would be the script
 * (["python3", "-W", "ignore", "${args.x}"] runs the file the sandbox
 * names). Matched as whole elements; an attached value ("-Wignore") takes
 * nothing more. */
static const struct {
        const char *interp;
        const char *one; /* options taking one value, each between spaces */
        const char *two; /* options taking two */
} valued_options[] = {
    {"python", " -W -X --check-hash-based-pycs ", ""},
    {"awk", " -v -F -i -l --assign --field-separator --include --load ", ""},
    {"gawk", " -v -F -i -l --assign --field-separator --include --load ", ""},
    {"mawk", " -v -F ", ""},
    {"nawk", " -v -F ", ""},
    {"perl", " -I ", ""},
    {"ruby", " -I -C ", ""},
    {"irb", " -I ", ""},
    {"node", " --title --conditions -C --loader --experimental-loader --input-type --env-file ",
     ""},
    {"nodejs", " --title --conditions -C --loader --experimental-loader --input-type ", ""},
    {"jq", " --indent -L ", " --arg --argjson --slurpfile --rawfile "},
    {"sed", " -l --line-length ", ""},
    {"php", " -d -z ", ""},
    {"java", " -cp -classpath --class-path -p --module-path --add-modules ", ""},
    {"jshell", " --class-path ", ""},
    {"lua", " -l ", ""},
    {"luajit", " -l ", ""},
    {"tclsh", " -encoding ", ""},
    {"wish", " -encoding ", ""},
    {"guile", " -L -l -x ", ""},
    {"erl", " -pa -pz -sname -name -setcookie ", ""},
};

static bool word_in(const char *list, const char *word)
{
        size_t n = strlen(word);
        for (const char *p = list; (p = strstr(p, word)); p++)
                if (p > list && p[-1] == ' ' && p[n] == ' ')
                        return true;
        return false;
}

/* How many of the elements after opt are its value for this interpreter. */
static unsigned option_values(const char *base, const char *rbase, const char *opt)
{
        for (size_t i = 0; i < ARRAY_SIZE(valued_options); i++) {
                if (!name_is(base, valued_options[i].interp) &&
                    !name_is(rbase, valued_options[i].interp))
                        continue;
                if (word_in(valued_options[i].one, opt))
                        return 1;
                if (word_in(valued_options[i].two, opt))
                        return 2;
        }
        return 0;
}

/* PowerShell's parameters are single-dash words, in any case, and any
 * unambiguous prefix: -Command, -comm, -c, -CommandWithArgs, -cwa,
 * -EncodedCommand, -ec, -e run a command line; -NoProfile does not. */
static bool is_pwsh_code_option(const char *s)
{
        static const char *const words[] = {"command", "commandwithargs", "encodedcommand"};
        char low[32];
        size_t n = 0;
        s += strspn(s, "-/");
        for (; s[n] && n + 1 < sizeof(low); n++)
                low[n] = (char)((s[n] >= 'A' && s[n] <= 'Z') ? s[n] - 'A' + 'a' : s[n]);
        low[n] = '\0';
        if (n == 0)
                return false;
        if (STREQ(low, "cwa") || STREQ(low, "ec") || STREQ(low, "e"))
                return true;
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strncmp(words[i], low, n) == 0)
                        return true;
        return false;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* The argv template: an absolute program that is not a shell, each
 * placeholder a whole element naming a scalar required argument. */
int policy_tool_check_command(struct tool_ctx *tc)
{
        struct policy_tool *t = tc->t;
        char name[160];
        const char *prog = t->argv[0];

        if (prog[0] != '/' || strstr(prog, "${"))
                return policy_tool_fail_key(
                    tc, "command", "argv[0] must be an absolute path to a program (got \"%s\")",
                    SHOWN(prog));
        const char *base = base_name(prog);
        /* A link to a shell is a shell: check where it leads too. */
        _cleanup_free_ char *real = realpath(prog, NULL);
        const char *rbase = real ? base_name(real) : base;
        if (in_list(base, shells, ARRAY_SIZE(shells)) || in_list(rbase, shells, ARRAY_SIZE(shells)))
                return policy_tool_fail_key(
                    tc, "command",
                    "argv[0] \"%s\" is a shell or runs a command line; a tool never "
                    "runs a shell: name the program itself",
                    SHOWN(prog));
        bool interp = in_list(base, interpreters, ARRAY_SIZE(interpreters)) ||
                      in_list(rbase, interpreters, ARRAY_SIZE(interpreters));
        bool script_seen = false, dashdash = false;
        unsigned values_left = 0; /* elements still an option's value */
        for (size_t i = 1; i < t->n_argv; i++) {
                const char *el = t->argv[i];
                const char *arg = policy_tool_placeholder(el, name, sizeof(name));
                if (!arg) {
                        if (strstr(el, "${"))
                                return policy_tool_fail_key(
                                    tc, "command",
                                    "element %zu (\"%s\"): a placeholder must be a "
                                    "whole argv element, \"${args.NAME}\" (secrets go "
                                    "in \"env\")",
                                    i, SHOWN(el));
                        if (interp && !script_seen && !dashdash && values_left > 0) {
                                values_left--;
                                continue;
                        }
                        if (interp && !script_seen && !dashdash) {
                                bool pwsh = name_is(base, "pwsh") || name_is(rbase, "pwsh");
                                if (pwsh ? el[0] == '-' && is_pwsh_code_option(el)
                                         : is_code_option(el))
                                        return policy_tool_fail_key(
                                            tc, "command",
                                            "element %zu (\"%s\") makes the "
                                            "interpreter \"%s\" run a command "
                                            "string; give it a script file",
                                            i, SHOWN(el), base);
                                if (STREQ(el, "-"))
                                        return policy_tool_fail_key(
                                            tc, "command",
                                            "element %zu: the interpreter \"%s\" "
                                            "would read its program from stdin",
                                            i, base);
                                if (STREQ(el, "--"))
                                        dashdash = true;
                                else if (el[0] != '-')
                                        script_seen = true;
                                else
                                        values_left = option_values(base, rbase, el);
                        }
                        continue;
                }
                if (interp && !script_seen)
                        return policy_tool_fail_key(
                            tc, "command",
                            "element %zu: an argument cannot come before the "
                            "interpreter \"%s\"'s script (it would choose the code)",
                            i, base);
                enum tool_schema_type type;
                bool required = false;
                if (tool_schema_property(t->schema, arg, &type, &required) < 0)
                        return policy_tool_fail_key(
                            tc, "command",
                            "element %zu names \"%s\", which \"args\" does not "
                            "define",
                            i, SHOWN(arg));
                if (type == TOOL_SCHEMA_ARRAY || type == TOOL_SCHEMA_OBJECT)
                        return policy_tool_fail_key(
                            tc, "command",
                            "element %zu: \"%s\" is an %s; only a string, number, "
                            "integer or boolean fills an argv element",
                            i, SHOWN(arg), type == TOOL_SCHEMA_ARRAY ? "array" : "object");
                if (!required)
                        return policy_tool_fail_key(
                            tc, "command",
                            "element %zu: \"%s\" must be listed in \"args.required\" "
                            "(an absent argument would shift the others)",
                            i, SHOWN(arg));
        }
        return 0;
}
