/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size > 1 << 20)
                return 0;
        char *json = malloc(size + 1);
        if (!json)
                return 0;
        memcpy(json, data, size);
        json[size] = '\0';

        struct policy *p = policy_new();
        struct al_error err = {0};
        if (policy_load_string(p, json, "fuzz", &err) == 0) {
                char *out = policy_to_json(p);
                free(out);
        } else if (err.msg[0] == '\0')
                abort(); /* every refusal says why */
        policy_free(p);
        free(json);
        return 0;
}
