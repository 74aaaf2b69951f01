/* SPDX-License-Identifier: Apache-2.0 */
/* `airlock run --control PATH` (supervisor/caps-socket.c): the socket
 * appears at PATH only once it listens. A client that waits for the path
 * and connects must never be refused because it came between the bind and
 * the listen (it was, under load: ECONNREFUSED on a path that existed). */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "supervisor/caps-socket.h"
#include "supervisor/core.h"

static char path[96];
static bool there_before_listen;

int __real_listen(int fd, int backlog);
int __wrap_listen(int fd, int backlog);
int __wrap_listen(int fd, int backlog)
{
        if (path[0] && access(path, F_OK) == 0)
                there_before_listen = true;
        return __real_listen(fd, backlog);
}

static char dir[] = "/tmp/airlock-capsock-XXXXXX";

static void setup(void)
{
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/c.sock", dir);
}

static void teardown(void)
{
        unlink(path);
        rmdir(dir);
}

Test(caps_socket_open, the_path_appears_only_once_it_listens, .init = setup, .fini = teardown)
{
        struct sv_core c = {0};
        c.base = event_base_new();
        struct caps_socket *s = NULL;
        struct al_error err = {0};
        cr_assert_eq(caps_socket_open(&c, path, &s, &err), 0, "%s", err.msg);
        cr_assert(!there_before_listen, "the socket was at its path before it listened");
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        close(fd);
        /* Nothing but the socket is left in the directory. */
        char other[160];
        snprintf(other, sizeof(other), "ls -A %s | grep -v '^c.sock$' | grep -q .", dir);
        cr_assert_neq(system(other), 0, "a staging name was left beside the socket");
        caps_socket_free(s);
        event_base_free(c.base);
}

Test(caps_socket_open, an_existing_path_is_refused_and_kept, .init = setup, .fini = teardown)
{
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs("mine\n", f);
        fclose(f);
        struct sv_core c = {0};
        c.base = event_base_new();
        struct caps_socket *s = NULL;
        struct al_error err = {0};
        cr_assert_lt(caps_socket_open(&c, path, &s, &err), 0);
        cr_assert(strstr(err.msg, "the path exists"), "%s", err.msg);
        char buf[16] = "";
        f = fopen(path, "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(buf, sizeof(buf), f));
        fclose(f);
        cr_assert_str_eq(buf, "mine\n");
        event_base_free(c.base);
}
