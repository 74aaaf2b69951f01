/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "image-internal.h"

/* The image layer engine (src/lib/image/layer.c): a layer from whoever built
 * the image, applied to a scratch root. Every refusal has a message, and
 * nothing is ever created beside the root (a sibling directory stays
 * empty). */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char base[64];
        if (!base[0]) {
                snprintf(base, sizeof(base), "/tmp/airlock-fuzz-layer-XXXXXX");
                if (!mkdtemp(base))
                        abort();
        }
        int b = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (b < 0 || mkdirat(b, "root", 0700) < 0 || mkdirat(b, "side", 0700) < 0)
                abort();
        int root = openat(b, "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int in = memfd_create("layer", MFD_CLOEXEC);
        if (root < 0 || in < 0 || write(in, data, size) != (ssize_t)size ||
            lseek(in, 0, SEEK_SET) < 0)
                abort();
        struct image_info info = {0};
        struct al_error err = {0};
        int r = image_layer_apply(root, in, "layer", &info, &err);
        if (r < 0 && !err.msg[0])
                abort();
        if (unlinkat(b, "side", AT_REMOVEDIR) < 0) /* must still be empty */
                abort();
        close(in);
        close(root);
        fs_remove_tree(b, "root", FS_REMOVE_DEPTH_MAX);
        close(b);
        return 0;
}
