/* SPDX-License-Identifier: Apache-2.0 */
/* The root id reserve (boundary/idrange.c) must skip ids the name service
 * knows from a source that is no file (LDAP, sssd): nsswitch.conf's sources,
 * and the lookup of each id by number. getpwuid_r and getgrgid_r are
 * replaced here by a directory that knows one account and one group in the
 * reserve, as sssd would. */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <string.h>

#include "idrange.h"

#define LDAP_UID (IDRANGE_BASE + 5000u)
#define LDAP_GID (IDRANGE_BASE + 9000u)
#define BROKEN   (IDRANGE_BASE + 20000u)

int getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t len, struct passwd **ret)
{
        *ret = NULL;
        if (uid == BROKEN)
                return EIO; /* the directory server did not answer */
        if (uid != LDAP_UID)
                return 0;
        memset(pw, 0, sizeof(*pw));
        cr_assert(len > 8);
        memcpy(buf, "ldapusr", 8);
        pw->pw_name = buf;
        pw->pw_uid = uid;
        *ret = pw;
        return 0;
}

int getgrgid_r(gid_t gid, struct group *gr, char *buf, size_t len, struct group **ret)
{
        *ret = NULL;
        if (gid != LDAP_GID)
                return 0;
        memset(gr, 0, sizeof(*gr));
        cr_assert(len > 8);
        memcpy(buf, "ldapgrp", 8);
        gr->gr_name = buf;
        gr->gr_gid = gid;
        *ret = gr;
        return 0;
}

Test(idrange_nss, lookup_by_number)
{
        /* The block holding the directory's account, and its group's. */
        cr_assert(idrange_ids_named(IDRANGE_BASE + 4 * IDRANGE_BLOCK, IDRANGE_BLOCK));
        cr_assert(idrange_ids_named(LDAP_GID, 1));
        cr_assert_not(idrange_ids_named(IDRANGE_BASE, IDRANGE_BLOCK));
        cr_assert_not(idrange_ids_named(LDAP_UID + 1, IDRANGE_BLOCK));
        /* A lookup that failed is no proof the id is free. */
        cr_assert(idrange_ids_named(BROKEN, 1));
}

Test(idrange_nss, sources)
{
        cr_assert(idrange_nss_local("passwd: files\ngroup: files\n"));
        cr_assert(idrange_nss_local("# x\npasswd:         files systemd\n"
                                    "group:  files [NOTFOUND=return] systemd # local\n"
                                    "hosts: files dns mdns4\nshadow: files sss\n"));
        cr_assert_not(idrange_nss_local(""));
        cr_assert_not(idrange_nss_local("passwd: files\n"));
        cr_assert_not(idrange_nss_local("passwd: files sss\ngroup: files sss\n"));
        cr_assert_not(idrange_nss_local("passwd: files\ngroup: files ldap\n"));
        cr_assert_not(idrange_nss_local("  passwd : compat\n"));
        cr_assert_not(idrange_nss_local("group:\tfiles\twinbind\n"));
        cr_assert_not(idrange_nss_local("passwd: [SUCCESS=return] nis files\n"));
}
