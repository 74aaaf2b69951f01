/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
