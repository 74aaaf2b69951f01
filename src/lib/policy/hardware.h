/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The policy's "hardware" section (docs/hardware.md): the driver the
 * supervisor reaches, the actuators the sandbox may move (an allow-list),
 * the sensors it may not read (a deny-list), and the limits the hardware
 * gate (src/lib/hwgate) enforces. The policy keeps the section as its
 * canonical JSON (struct policy.hardware_json); this is its parsed form. */

#define POLICY_HW_NAME_MAX               64  /* bytes of a device name: [A-Za-z0-9_.-] */
#define POLICY_HW_DEVICES_MAX            64  /* entries in each list */
#define POLICY_HW_ARGV_MAX               64  /* words of driver.command */
#define POLICY_HW_SPEED_MAX              1e6 /* the largest maxSpeed or value there is */
#define POLICY_HW_RATE_MAX               1000.0
#define POLICY_HW_TIMEOUT_MAX            86400.0 /* motionTimeout, seconds */
#define POLICY_HW_TIMEOUT_MIN            0.1
#define POLICY_HW_RATE_MIN               0.1
#define POLICY_HW_DEFAULT_RATE           10.0
#define POLICY_HW_DEFAULT_MOTION_TIMEOUT 30.0

struct policy_hw_limit {
        char name[POLICY_HW_NAME_MAX + 1];
        double max_speed; /* 0: the global one */
        double max_accel; /* 0: the global one */
};

struct policy_hardware {
        char **command; /* driver.command (NULL-terminated), or NULL */
        size_t n_command;
        char *socket; /* driver.socket, or NULL */
        char **act_allow;
        size_t n_act_allow;
        char **act_deny;
        size_t n_act_deny;
        char **sensors_deny;
        size_t n_sensors_deny;
        double max_speed;      /* > 0 */
        double max_accel;      /* 0: none (a set is applied at once) */
        double motion_timeout; /* seconds */
        double rate;           /* actions per second */
        struct policy_hw_limit *per;
        size_t n_per;
};

/* Parse and check a "hardware" object (unknown keys, types, NaN and
 * infinities, ranges, names). path prefixes messages ("hardware"). 0, or
 * -EINVAL with err set naming the key. */
int policy_hardware_parse(const json_t *v, const char *path, struct policy_hardware *ret,
                          struct al_error *err);
void policy_hardware_clear(struct policy_hardware *h);
/* From the policy's canonical text (policy.hardware_json). */
int policy_hardware_from_text(const char *text, struct policy_hardware *ret, struct al_error *err);

/* An operator's file {"hardware": {...}} (airlockd --hardware FILE),
 * checked, set as p's hardware section. */
struct policy;
int policy_hardware_load_file(struct policy *p, const char *path, struct al_error *err);

/* Whether a name may be moved (in actuators.allow, not in actuators.deny) or
 * read (not in sensors.deny), and an actuator's limits. */
bool policy_hardware_actuator_allowed(const struct policy_hardware *h, const char *name);
bool policy_hardware_sensor_allowed(const struct policy_hardware *h, const char *name);
void policy_hardware_limits(const struct policy_hardware *h, const char *name, double *max_speed,
                            double *max_accel);
/* Whether s is a device name: 1 to 64 of [A-Za-z0-9_.-]. */
bool policy_hardware_name_ok(const char *s);
