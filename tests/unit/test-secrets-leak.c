/* SPDX-License-Identifier: Apache-2.0 */
/* A secrets file that does not parse must not put its values in the error
 * message (printed on the terminal, in airlockd's log): the JSON parser's
 * own message quotes the text near the error, which is a value. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secrets.h"

static void try(const char *text)
{
        char path[] = "/tmp/airlock-secrets-leak-XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        fchmod(fd, 0600);
        close(fd);
        struct secrets *s = NULL;
        struct al_error err = {0};
        int r = secrets_load_file(path, &s, &err);
        unlink(path);
        cr_assert_lt(r, 0, "%s loaded", text);
        cr_expect_null(strstr(err.msg, "SECRET"), "the error shows the value: %s", err.msg);
        cr_expect(strstr(err.msg, "line"), "the error does not say where: %s", err.msg);
}

Test(secrets_leak, parse_errors_do_not_quote_values)
{
        try("{\"A\": SECRET123}");
        try("{\"A\": \"sk-live-SECRET\\q\"}");
        try("{\"A\": \"sk-live-SECRET\x01x\"}");
        try("{\"A\": \"sk-live-SECRET\"\n \"B\": 1}");
        try("{\"A\": \"sk-live-SECRET\"");
}
