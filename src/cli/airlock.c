/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

int main(int argc, char **argv)
{
        fprintf(stderr, "airlock: not built yet\n");
        return 125;
}
