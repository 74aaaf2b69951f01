/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "files-tar.h"
#include "files.h"

/* The files API's tar reader (src/daemon/files-tar.c): a client's archive,
 * checked whole before anything is written. Whatever it accepts names only
 * paths beneath the destination (no absolute name, no ".." component), and
 * every refusal has a message. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct al_error err = {0};
        size_t n = 0;
        int r = files_tar_check("dest", data, size, &n, &err);
        if (r < 0 && !err.msg[0])
                abort();
        if (r >= 0 && n > FILES_TAR_ENTRIES_MAX)
                abort();
        return 0;
}
