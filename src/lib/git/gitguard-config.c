/* SPDX-License-Identifier: Apache-2.0 */
/* gitguard's judgement of git config (gitguard.h): which keys make git run
 * a program or read elsewhere, and a parser of config files that fails
 * closed on any text git might read differently. The walk that applies it
 * to what the agent left is gitguard.c. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "gitguard-internal.h"
#include "gitguard.h"
#include "util.h"

static bool ieq(const char *a, const char *b)
{
        return a && b && strcasecmp(a, b) == 0;
}

static bool false_value(const char *v)
{
        return v && (ieq(v, "false") || ieq(v, "no") || ieq(v, "off") || STREQ(v, "0") || !*v);
}

static bool bool_value(const char *v)
{
        return !v || false_value(v) || ieq(v, "true") || ieq(v, "yes") || ieq(v, "on") ||
               STREQ(v, "1");
}

static bool shell_alias(const char *v)
{
        while (v && isspace((unsigned char)*v))
                v++;
        return v && *v == '!';
}

/* Whether sec.name names a file host git opens by path (at every status:
 * core.excludesFile; or at a commit, blame, log, fetch, or an https
 * request), whatever its subsection. */
static bool opens_file(const char *sec, const char *name)
{
        static const struct {
                const char *sec, *name;
        } keys[] = {{"core", "excludesfile"},      {"core", "attributesfile"},
                    {"commit", "template"},        {"blame", "ignorerevsfile"},
                    {"mailmap", "file"},           {"http", "cookiefile"},
                    {"http", "sslcert"},           {"http", "sslkey"},
                    {"http", "sslcainfo"},         {"http", "sslcapath"},
                    {"gpg", "allowedsignersfile"}, {"gpg", "revocationfile"},
                    {"fsck", "skiplist"},          {"receive", "skiplist"},
                    {"fetch", "skiplist"}};
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                if (ieq(sec, keys[i].sec) && ieq(name, keys[i].name))
                        return true;
        return false;
}

const char *gitguard_key_reason(const char *sec, const char *sub, const char *name,
                                const char *value)
{
        if (!sec || !name)
                return NULL;
        if (opens_file(sec, name))
                return "a setting names a file host git opens (a FIFO there blocks git for good; "
                       "a device's driver acts on the open)";
        if (ieq(sec, "core") && !sub) {
                if (ieq(name, "fsmonitor"))
                        return false_value(value) ? NULL : "core.fsmonitor runs a program";
                static const char *const run[] = {
                    "hookspath", "sshcommand",          "pager", "editor", "askpass",
                    "gitproxy",  "alternaterefscommand"};
                for (size_t i = 0; i < ARRAY_SIZE(run); i++)
                        if (ieq(name, run[i]))
                                return ieq(name, "hookspath")
                                           ? "core.hooksPath runs hooks from elsewhere"
                                           : "a core setting names a program git runs";
                if (ieq(name, "worktree"))
                        return "core.worktree points git at another directory";
                return NULL;
        }
        /* The user's credentials (their helper's) go through a proxy the
         * agent chose, which with verification off reads them. */
        if (ieq(sec, "http") && ieq(name, "proxy"))
                return "http.proxy sends host git's requests through another host";
        if (ieq(sec, "http") && ieq(name, "sslverify") && false_value(value))
                return "http.sslVerify off lets anyone on the way read host git's credentials";
        if (ieq(sec, "credential") && ieq(name, "helper"))
                return "credential.helper runs a program";
        if (ieq(sec, "filter") && sub &&
            (ieq(name, "clean") || ieq(name, "smudge") || ieq(name, "process")))
                return "a filter driver runs a program";
        if (ieq(sec, "diff") && sub && (ieq(name, "textconv") || ieq(name, "command")))
                return "a diff driver runs a program";
        if (ieq(sec, "diff") && !sub && ieq(name, "external"))
                return "diff.external runs a program";
        if (ieq(sec, "merge") && sub && ieq(name, "driver"))
                return "a merge driver runs a program";
        if ((ieq(sec, "include") || ieq(sec, "includeif")) && ieq(name, "path"))
                return "include.path reads config from elsewhere";
        if (ieq(sec, "uploadpack") && ieq(name, "packobjectshook"))
                return "uploadpack.packObjectsHook runs a program";
        if (ieq(sec, "remote") && sub &&
            (ieq(name, "uploadpack") || ieq(name, "receivepack") || ieq(name, "proxy") ||
             ieq(name, "vcs")))
                return "a remote setting names a program or proxy git uses";
        if (ieq(sec, "alias") && shell_alias(value))
                return "a shell alias runs a program";
        if (ieq(sec, "submodule") && sub && ieq(name, "update") && shell_alias(value))
                return "submodule.*.update runs a program";
        if (ieq(sec, "sequence") && ieq(name, "editor"))
                return "sequence.editor runs a program";
        if (ieq(sec, "gpg") && (ieq(name, "program") || ieq(name, "defaultkeycommand")))
                return "gpg.program runs a program";
        if (ieq(sec, "pager") && !bool_value(value))
                return "a pager setting runs a program";
        if (ieq(sec, "interactive") && ieq(name, "difffilter"))
                return "interactive.diffFilter runs a program";
        if ((ieq(sec, "difftool") || ieq(sec, "mergetool") || ieq(sec, "man") ||
             ieq(sec, "browser")) &&
            sub && (ieq(name, "cmd") || ieq(name, "path")))
                return "a tool setting runs a program";
        if (ieq(sec, "sendemail")) {
                size_t n = strlen(name);
                if (n >= 3 && ieq(name + n - 3, "cmd"))
                        return "a sendemail setting runs a program";
        }
        /* "user" allows ext:: on every fetch or clone the user types. */
        if (ieq(sec, "protocol") && ieq(name, "allow") &&
            (ieq(value, "always") || ieq(value, "user")))
                return "protocol.allow lets URLs run programs (ext::)";
        if (ieq(sec, "tar") && sub && ieq(name, "command"))
                return "tar.<format>.command runs a program (git archive)";
        if (ieq(sec, "trailer") && sub && (ieq(name, "command") || ieq(name, "cmd")))
                return "a trailer command runs a program";
        if (ieq(sec, "imap") && ieq(name, "tunnel"))
                return "imap.tunnel runs a program";
        if (ieq(sec, "guitool") && sub && ieq(name, "cmd"))
                return "a git gui tool runs a program";
        if (ieq(sec, "hook") && sub && ieq(name, "command"))
                return "a configured hook runs a program";
        if (ieq(sec, "instaweb") && (ieq(name, "httpd") || ieq(name, "modulepath")))
                return "instaweb runs a program";
        if (ieq(sec, "sendemail") && ieq(name, "smtpserver") && value && value[0] == '/')
                return "sendemail.smtpServer names a program";
        /* git-lfs (a filter the host may have installed) runs custom
         * transfer agents and extensions named in the repository's config. */
        if (ieq(sec, "lfs") && sub &&
            (ieq(name, "path") || ieq(name, "clean") || ieq(name, "smudge")))
                return "a git-lfs transfer agent or extension runs a program";
        if (ieq(sec, "init") && ieq(name, "templatedir"))
                return "init.templateDir copies hooks from elsewhere";
        return NULL;
}

struct cfg_parser {
        const char *s;
        size_t n, i;
        char sec[256];
        char sub[1024];
        bool has_sub;
        /* Where a value held a NUL (git reads on, the value ends there for
         * whoever uses it), 0: none. Read on as git does, then -1. */
        size_t nul_at;
};

static int peek(const struct cfg_parser *p)
{
        return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

static void skip_blank(struct cfg_parser *p)
{
        while (peek(p) == ' ' || peek(p) == '\t' || peek(p) == '\r')
                p->i++;
}

static void skip_line(struct cfg_parser *p)
{
        while (p->i < p->n && p->s[p->i] != '\n')
                p->i++;
}

/* "[section]", "[section \"sub\"]" or "[section.sub]". */
static int parse_header(struct cfg_parser *p)
{
        p->i++; /* '[' */
        size_t k = 0;
        p->has_sub = false;
        while (peek(p) >= 0 && (isalnum(peek(p)) || peek(p) == '-' || peek(p) == '.')) {
                if (k + 1 >= sizeof(p->sec))
                        return -1;
                p->sec[k++] = (char)peek(p);
                p->i++;
        }
        p->sec[k] = '\0';
        if (k == 0)
                return -1;
        char *dot = strchr(p->sec, '.');
        if (dot) {
                /* The old form: the subsection is lowercased. */
                *dot = '\0';
                snprintf(p->sub, sizeof(p->sub), "%s", dot + 1);
                for (char *c = p->sub; *c; c++)
                        *c = (char)tolower((unsigned char)*c);
                p->has_sub = true;
        }
        if (peek(p) == ' ' || peek(p) == '\t') {
                if (dot)
                        return -1;
                skip_blank(p);
                if (peek(p) != '"')
                        return -1;
                p->i++;
                k = 0;
                for (;;) {
                        int c = peek(p);
                        if (c < 0 || c == '\n' || c == '\0')
                                return -1;
                        p->i++;
                        if (c == '"')
                                break;
                        if (c == '\\') {
                                c = peek(p);
                                if (c < 0 || c == '\n' || c == '\0')
                                        return -1;
                                p->i++;
                        }
                        if (k + 1 >= sizeof(p->sub))
                                return -1;
                        p->sub[k++] = (char)c;
                }
                p->sub[k] = '\0';
                p->has_sub = true;
        }
        if (peek(p) != ']')
                return -1;
        p->i++;
        return 0;
}

/* git's blanks (its own ctype): not \v or \f. */
static bool git_space(int c)
{
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The next character as git's reader gives it: CRLF as LF, the end of
 * the file as LF (a backslash there continues an empty line). */
static int next_char(struct cfg_parser *p)
{
        int c = peek(p);
        if (c < 0)
                return '\n';
        p->i++;
        if (c == '\r' && peek(p) == '\n') {
                p->i++;
                c = '\n';
        }
        return c;
}

static void add_char(char **v, size_t *cap, size_t *j, char c)
{
        if (*j + 2 > *cap) {
                *v = xrealloc(*v, *cap * 2, 1);
                *cap *= 2;
        }
        (*v)[(*j)++] = c;
}

/* "name [= value]", the value with quotes, escapes and continuations as git
 * reads them. */
static int parse_key(struct cfg_parser *p, char *name, size_t name_len, char **ret_value)
{
        size_t k = 0;
        if (!isalpha(peek(p)))
                return -1;
        while (peek(p) >= 0 && (isalnum(peek(p)) || peek(p) == '-')) {
                if (k + 1 >= name_len)
                        return -1;
                name[k++] = (char)peek(p);
                p->i++;
        }
        name[k] = '\0';
        skip_blank(p);
        *ret_value = NULL;
        if (peek(p) < 0 || peek(p) == '\n' || peek(p) == '#' || peek(p) == ';') {
                skip_line(p);
                return 0;
        }
        if (peek(p) != '=')
                return -1;
        p->i++;
        /* Grown as the value is read: sized for the rest of the file, a
         * megabyte of short keys cost the scan seconds (quadratic). */
        size_t cap = 64, j = 0, space = 0;
        _cleanup_free_ char *v = xcalloc(cap, 1);
        bool quoted = false, comment = false;
        /* git's own reading, step by step: its blanks are space, tab, CR
         * and LF only (a "false\v" is a program's name to it), a run of
         * them inside the value is kept as as many spaces, none before
         * it (nor after a continuation), a backslash at the end of the
         * file continues the value, and a NUL ends it for whoever uses it
         * (git keeps reading the line). */
        for (;;) {
                int c = next_char(p);
                if (c == '\n') {
                        if (quoted)
                                return -1;
                        break;
                }
                if (comment)
                        continue;
                if (git_space(c) && !quoted) {
                        if (j)
                                space++;
                        continue;
                }
                if (!quoted && (c == ';' || c == '#')) {
                        comment = true;
                        continue;
                }
                for (; space; space--)
                        add_char(&v, &cap, &j, ' ');
                if (c == '"') {
                        quoted = !quoted;
                        continue;
                }
                if (c == '\\') {
                        c = next_char(p);
                        if (c == '\n')
                                continue;
                        if (c == 't')
                                c = '\t';
                        else if (c == 'b')
                                c = '\b';
                        else if (c == 'n')
                                c = '\n';
                        else if (c != '\\' && c != '"')
                                return -1;
                }
                if (c == '\0' && !p->nul_at)
                        p->nul_at = p->i;
                add_char(&v, &cap, &j, (char)c);
        }
        v[j] = '\0';
        *ret_value = TAKE_PTR(v);
        return 0;
}

/* Each key of a config file in order, to fn (which stops the walk by
 * returning true); -1 at the first text git might read differently, with
 * the parser where it stopped. */
typedef bool (*cfg_key_fn)(const char *sec, const char *sub, const char *name, const char *value,
                           void *userdata);

static int cfg_each(struct cfg_parser *p, cfg_key_fn fn, void *userdata)
{
        /* A byte-order mark is skipped by git too. */
        if (p->n >= 3 && memcmp(p->s, "\xef\xbb\xbf", 3) == 0)
                p->i = 3;
        bool in_section = false;
        while (p->i < p->n) {
                skip_blank(p);
                int c = peek(p);
                if (c < 0)
                        break;
                if (c == '\n') {
                        p->i++;
                        continue;
                }
                if (c == '#' || c == ';') {
                        skip_line(p);
                        continue;
                }
                if (c == '[') {
                        if (parse_header(p) < 0)
                                return -1;
                        in_section = true;
                        skip_blank(p);
                        c = peek(p);
                        if (c < 0 || c == '\n' || c == '#' || c == ';')
                                continue;
                        /* git takes a key on the header's line too. */
                }
                if (!in_section)
                        return -1;
                char name[256];
                _cleanup_free_ char *value = NULL;
                if (parse_key(p, name, sizeof(name), &value) < 0)
                        return -1;
                if (fn(p->sec, p->has_sub ? p->sub : NULL, name, value, userdata))
                        return 1;
        }
        if (p->nul_at) {
                p->i = p->nul_at;
                return -1;
        }
        return 0;
}

int gitguard_config_each(const char *text, size_t len, gitguard_key_fn fn, void *userdata)
{
        struct cfg_parser p = {.s = text, .n = len};
        return cfg_each(&p, fn, userdata);
}

struct cfg_value {
        const char *sec, *name;
        char *value;
};

static bool take_value(const char *sec, const char *sub, const char *name, const char *value,
                       void *userdata)
{
        struct cfg_value *v = userdata;
        if (!sub && ieq(sec, v->sec) && ieq(name, v->name)) {
                free(v->value); /* the last one counts, as in git */
                v->value = value ? xstrdup(value) : NULL;
        }
        return false;
}

char *gitguard_config_value(const char *text, size_t len, const char *sec, const char *name)
{
        struct cfg_parser p = {.s = text, .n = len};
        struct cfg_value v = {.sec = sec, .name = name};
        if (cfg_each(&p, take_value, &v) < 0) {
                free(v.value);
                return NULL;
        }
        return v.value;
}

struct cfg_reason {
        char *buf;
        size_t len;
};

static bool take_reason(const char *sec, const char *sub, const char *name, const char *value,
                        void *userdata)
{
        struct cfg_reason *r = userdata;
        const char *why = gitguard_key_reason(sec, sub, name, value);
        if (why)
                snprintf(r->buf, r->len, "%s", why);
        return why != NULL;
}

struct cfg_paths {
        char **v;
        size_t n;
};

static bool take_include(const char *sec, const char *sub, const char *name, const char *value,
                         void *userdata)
{
        struct cfg_paths *c = userdata;
        if (value && *value && ieq(name, "path") &&
            ((ieq(sec, "include") && !sub) || (ieq(sec, "includeif") && sub)))
                c->v = strv_append(c->v, &c->n, value);
        return false;
}

/* The program a command line starts with, when it is named by a path
 * (a name alone is looked up on PATH): "! scripts/x.sh --all" gives
 * "scripts/x.sh". */
static char *command_path(const char *v)
{
        while (isspace((unsigned char)*v))
                v++;
        if (*v == '!')
                v++;
        while (isspace((unsigned char)*v))
                v++;
        size_t k;
        if (*v == '"' || *v == '\'') {
                char q = *v++;
                k = strcspn(v, (char[]){q, '\0'});
        } else
                k = strcspn(v, " \t\r\n;&|<>()");
        if (k == 0 || !memchr(v, '/', k))
                return NULL;
        return xasprintf("%.*s", (int)k, v);
}

static bool take_program(const char *sec, const char *sub, const char *name, const char *value,
                         void *userdata)
{
        struct cfg_paths *c = userdata;
        /* Not programs: config read from elsewhere, directories. */
        if (!value || ieq(sec, "include") || ieq(sec, "includeif") ||
            (ieq(sec, "core") && (ieq(name, "worktree") || ieq(name, "hookspath"))) ||
            opens_file(sec, name) || !gitguard_key_reason(sec, sub, name, value))
                return false;
        char *prog = command_path(value);
        if (prog) {
                c->v = strv_append(c->v, &c->n, prog);
                free(prog);
        }
        return false;
}

char **gitguard_config_programs(const char *text, size_t len, size_t *ret_n)
{
        struct cfg_parser p = {.s = text, .n = len};
        struct cfg_paths c = {0};
        (void)cfg_each(&p, take_program, &c);
        *ret_n = c.n;
        return c.v;
}

char **gitguard_config_includes(const char *text, size_t len, size_t *ret_n)
{
        struct cfg_parser p = {.s = text, .n = len};
        struct cfg_paths c = {0};
        (void)cfg_each(&p, take_include, &c); /* what was read before a bad line */
        *ret_n = c.n;
        return c.v;
}

int gitguard_config_check(const char *text, size_t len, char *reason, size_t reason_len)
{
        struct cfg_parser p = {.s = text, .n = len};
        struct cfg_reason r = {.buf = reason, .len = reason_len};
        int k = cfg_each(&p, take_reason, &r);
        if (k >= 0)
                return k;
        size_t line = 1;
        for (size_t i = 0; i < p.i && i < p.n; i++)
                line += text[i] == '\n';
        snprintf(reason, reason_len, "a config Airlock cannot read through (line %zu)", line);
        return 1;
}

/* The directory a "gitdir: X" pointer in directory rel names, as a path
 * relative to the root ("." for the root itself), or NULL when it leaves
 * the root or is absolute. */
char *gitguard_pointer_target(const char *rel, const char *target)
{
        if (target[0] == '/' || !*target)
                return NULL;
        _cleanup_free_ char *joined = gitguard_join(rel, target);
        size_t len = strlen(joined);
        _cleanup_free_ char *out = xcalloc(len + 2, 1);
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                size_t k = strcspn(joined + i, "/");
                const char *t = joined + i;
                if (k == 0 || (k == 1 && t[0] == '.')) {
                        /* nothing */
                } else if (k == 2 && t[0] == '.' && t[1] == '.') {
                        if (o == 0)
                                return NULL;
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--;
                } else {
                        if (o > 0)
                                out[o++] = '/';
                        memcpy(out + o, t, k);
                        o += k;
                }
                i += k + (joined[i + k] == '/');
        }
        out[o] = '\0';
        if (o == 0) {
                out[0] = '.';
                out[1] = '\0';
        }
        return TAKE_PTR(out);
}
