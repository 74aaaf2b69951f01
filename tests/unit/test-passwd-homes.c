/* SPDX-License-Identifier: Apache-2.0 */
/* The homes of /etc/passwd that "~/" deny entries apply to, read a line at
 * a time (deny.c: mounts_passwd_homes()). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mounts-internal.h"
#include "util.h"

TestSuite(passwd_homes, .timeout = 10);

Test(passwd_homes, every_absolute_home_but_the_root)
{
        static const char text[] = "root:x:0:0:root:/root:/bin/bash\n"
                                   "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
                                   "slash:x:2:2::/:/bin/sh\n"          /* "/" is no home */
                                   "rel:x:3:3::relative/dir:/bin/sh\n" /* nor a relative path */
                                   "empty:x:4:4:::/bin/sh\n"           /* nor nothing */
                                   "short:x:5:5:gecos\n"               /* five fields */
                                   "odd:x:notanumber:6::/srv/odd:/bin/sh\n" /* still a home */
                                   "\n"
                                   "nosh:x:7:7::/var/lib/nosh\n" /* no shell field, no newline */
                                   "last:x:8:8:a,b,c:/home/last:/bin/zsh";
        FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");
        cr_assert_not_null(f);
        size_t n = 0;
        char **homes = mounts_passwd_homes(f, NULL, &n);
        fclose(f);
        static const char *const want[] = {"/root", "/usr/sbin", "/srv/odd", "/var/lib/nosh",
                                           "/home/last"};
        cr_assert_eq(n, sizeof(want) / sizeof(want[0]), "%zu homes", n);
        for (size_t i = 0; i < n; i++)
                cr_assert_str_eq(homes[i], want[i]);
        strv_free(homes);
}
