/* SPDX-License-Identifier: Apache-2.0 */
/* The policy's "hardware" section (docs/hardware.md, docs/policy.md):
 *
 *   "hardware": {
 *     "driver": {"command": ["python3", "robot_sim.py", "--stdio"]}
 *               or {"socket": "/run/robot.sock"},
 *     "actuators": {"allow": ["motor_left", "motor_right"], "deny": ["arm_joint_5"]},
 *     "sensors": {"deny": ["microphone"]},
 *     "limits": {"maxSpeed": 0.5, "maxAcceleration": 0.2, "motionTimeout": 30, "rate": 10,
 *                "actuators": {"motor_left": {"maxSpeed": 0.3}}}
 *   }
 *
 * Everything is checked here, once: a key the gate would not enforce is an
 * error, never ignored. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fs.h"
#include "hardware.h"
#include "policy.h"
#include "util.h"

struct hctx {
        struct al_error *err;
        char path[192];
};

static int fail(struct hctx *c, const char *key, const char *fmt, const char *what)
{
        al_error_set_message(c->err, EINVAL, "\"%s%s%s\" %s%s", c->path, key ? "." : "",
                             key ? key : "", fmt, what ? what : "");
        return -EINVAL;
}

static size_t push(struct hctx *c, const char *key)
{
        size_t mark = strlen(c->path);
        snprintf(c->path + mark, sizeof(c->path) - mark, ".%s", key);
        return mark;
}

static void pop(struct hctx *c, size_t mark)
{
        c->path[mark] = '\0';
}

bool policy_hardware_name_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > POLICY_HW_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
                        return false;
        }
        return true;
}

static bool in_list(char *const *v, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (STREQ(v[i], s))
                        return true;
        return false;
}

static int get_names(struct hctx *c, const char *key, const json_t *v, char ***ret, size_t *n)
{
        size_t i;
        json_t *e;
        if (!json_is_array(v) || json_array_size(v) > POLICY_HW_DEVICES_MAX)
                return fail(c, key, "must be an array of at most 64 device names", NULL);
        json_array_foreach(v, i, e)
        {
                const char *s = json_string_value(e);
                if (!json_is_string(e) || strlen(s) != json_string_length(e) ||
                    !policy_hardware_name_ok(s))
                        return fail(c, key,
                                    "must hold device names: 1 to 64 letters, digits, '_', '.' "
                                    "or '-'",
                                    NULL);
                if (in_list(*ret, *n, s))
                        return fail(c, key, "names a device twice: ", s);
                *ret = strv_append(*ret, n, s);
        }
        return 0;
}

/* A finite number in [min, max] (min excluded when open_min). */
static int get_number(struct hctx *c, const char *key, const json_t *v, double min, double max,
                      bool open_min, double *ret)
{
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        char what[96];
        if (!isfinite(x) || x > max || x < min || (open_min && x == min)) {
                snprintf(what, sizeof(what), "%s %g and at most %g", open_min ? "above" : "from",
                         min, max);
                return fail(c, key, "must be a finite number ", what);
        }
        *ret = x;
        return 0;
}

static int parse_driver(struct hctx *c, const json_t *v, struct policy_hardware *h)
{
        const char *key;
        json_t *e;
        if (!json_is_object(v))
                return fail(c, NULL,
                            "must be an object: {\"command\": [...]} or {\"socket\": PATH}", NULL);
        json_object_foreach((json_t *)v, key, e)
        {
                if (STREQ(key, "command")) {
                        size_t i;
                        json_t *w;
                        if (!json_is_array(e) || json_array_size(e) == 0 ||
                            json_array_size(e) > POLICY_HW_ARGV_MAX)
                                return fail(c, key, "must be an array of 1 to 64 strings (argv)",
                                            NULL);
                        json_array_foreach(e, i, w)
                        {
                                if (!json_is_string(w) || json_string_length(w) == 0 ||
                                    json_string_length(w) > 4096 ||
                                    strlen(json_string_value(w)) != json_string_length(w))
                                        return fail(c, key,
                                                    "must hold non-empty strings without NUL "
                                                    "bytes (argv)",
                                                    NULL);
                                h->command =
                                    strv_append(h->command, &h->n_command, json_string_value(w));
                        }
                } else if (STREQ(key, "socket")) {
                        const char *s = json_string_value(e);
                        if (!s || s[0] != '/' || strlen(s) != json_string_length(e) ||
                            strlen(s) >= 108)
                                return fail(c, key,
                                            "must be an absolute path to a unix socket (under 108 "
                                            "bytes)",
                                            NULL);
                        h->socket = xstrdup(s);
                } else
                        return fail(c, key, "is an unknown key (driver has command or socket)",
                                    NULL);
        }
        if (!!h->command == !!h->socket)
                return fail(c, NULL, "must name exactly one of \"command\" and \"socket\"", NULL);
        return 0;
}

static int parse_per(struct hctx *c, const json_t *v, struct policy_hardware *h)
{
        const char *name;
        json_t *o;
        if (!json_is_object(v) || json_object_size(v) > POLICY_HW_DEVICES_MAX)
                return fail(c, NULL, "must be an object of at most 64 actuators' limits", NULL);
        h->per = xcalloc(json_object_size(v) ? json_object_size(v) : 1, sizeof(*h->per));
        json_object_foreach((json_t *)v, name, o)
        {
                if (!policy_hardware_name_ok(name))
                        return fail(c, NULL, "names something that is not a device name: ", name);
                size_t mark = push(c, name);
                struct policy_hw_limit *l = &h->per[h->n_per++];
                snprintf(l->name, sizeof(l->name), "%s", name);
                const char *key;
                json_t *e;
                if (!json_is_object(o) || json_object_size(o) == 0)
                        return fail(c, NULL, "must be an object with maxSpeed or maxAcceleration",
                                    NULL);
                json_object_foreach(o, key, e)
                {
                        int r;
                        if (STREQ(key, "maxSpeed"))
                                r = get_number(c, key, e, 0, POLICY_HW_SPEED_MAX, true,
                                               &l->max_speed);
                        else if (STREQ(key, "maxAcceleration"))
                                r = get_number(c, key, e, 0, POLICY_HW_SPEED_MAX, true,
                                               &l->max_accel);
                        else
                                r = fail(c, key,
                                         "is an unknown key (an actuator's limits are maxSpeed and "
                                         "maxAcceleration)",
                                         NULL);
                        if (r < 0)
                                return r;
                }
                pop(c, mark);
        }
        return 0;
}

static int parse_limits(struct hctx *c, const json_t *v, struct policy_hardware *h)
{
        const char *key;
        json_t *e;
        if (!json_is_object(v))
                return fail(c, NULL, "must be an object", NULL);
        json_object_foreach((json_t *)v, key, e)
        {
                int r;
                if (STREQ(key, "maxSpeed"))
                        r = get_number(c, key, e, 0, POLICY_HW_SPEED_MAX, true, &h->max_speed);
                else if (STREQ(key, "maxAcceleration"))
                        r = get_number(c, key, e, 0, POLICY_HW_SPEED_MAX, true, &h->max_accel);
                else if (STREQ(key, "motionTimeout"))
                        r = get_number(c, key, e, POLICY_HW_TIMEOUT_MIN, POLICY_HW_TIMEOUT_MAX,
                                       false, &h->motion_timeout);
                else if (STREQ(key, "rate"))
                        r = get_number(c, key, e, POLICY_HW_RATE_MIN, POLICY_HW_RATE_MAX, false,
                                       &h->rate);
                else if (STREQ(key, "actuators")) {
                        size_t mark = push(c, key);
                        r = parse_per(c, e, h);
                        pop(c, mark);
                } else
                        r = fail(c, key,
                                 "is an unknown key (limits has maxSpeed, maxAcceleration, "
                                 "motionTimeout, rate and actuators)",
                                 NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_list_obj(struct hctx *c, const json_t *v, const char *const *keys, char ***lists[],
                          size_t *ns[], const char *known)
{
        const char *key;
        json_t *e;
        if (!json_is_object(v))
                return fail(c, NULL, "must be an object", NULL);
        json_object_foreach((json_t *)v, key, e)
        {
                size_t i = 0;
                while (keys[i] && !STREQ(keys[i], key))
                        i++;
                if (!keys[i])
                        return fail(c, key, "is an unknown key ", known);
                int r = get_names(c, key, e, lists[i], ns[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

void policy_hardware_clear(struct policy_hardware *h)
{
        strv_free(h->command);
        free(h->socket);
        strv_free(h->act_allow);
        strv_free(h->act_deny);
        strv_free(h->sensors_deny);
        free(h->per);
        memset(h, 0, sizeof(*h));
}

int policy_hardware_parse(const json_t *v, const char *path, struct policy_hardware *h,
                          struct al_error *err)
{
        struct hctx c = {.err = err};
        const char *key;
        json_t *e;
        int r = 0;

        memset(h, 0, sizeof(*h));
        snprintf(c.path, sizeof(c.path), "%s", path ? path : "hardware");
        h->motion_timeout = POLICY_HW_DEFAULT_MOTION_TIMEOUT;
        h->rate = POLICY_HW_DEFAULT_RATE;
        if (!json_is_object(v)) {
                r = fail(&c, NULL, "must be an object", NULL);
                goto out;
        }
        json_object_foreach((json_t *)v, key, e)
        {
                size_t mark = push(&c, key);
                if (STREQ(key, "driver"))
                        r = parse_driver(&c, e, h);
                else if (STREQ(key, "actuators")) {
                        static const char *const keys[] = {"allow", "deny", NULL};
                        char ***lists[] = {&h->act_allow, &h->act_deny};
                        size_t *ns[] = {&h->n_act_allow, &h->n_act_deny};
                        r = parse_list_obj(&c, e, keys, lists, ns,
                                           "(actuators has allow and deny)");
                } else if (STREQ(key, "sensors")) {
                        static const char *const keys[] = {"deny", NULL};
                        char ***lists[] = {&h->sensors_deny};
                        size_t *ns[] = {&h->n_sensors_deny};
                        r = parse_list_obj(
                            &c, e, keys, lists, ns,
                            "(sensors has deny: every sensor not named is readable)");
                } else if (STREQ(key, "limits"))
                        r = parse_limits(&c, e, h);
                else {
                        pop(&c, mark);
                        r = fail(&c, key,
                                 "is an unknown key (hardware has driver, actuators, sensors and "
                                 "limits)",
                                 NULL);
                }
                if (r < 0)
                        goto out;
                pop(&c, mark);
        }
        if (!h->command && !h->socket) {
                r = fail(
                    &c, "driver",
                    "is required: {\"command\": [...]} or {\"socket\": PATH} (docs/hardware.md)",
                    NULL);
                goto out;
        }
        if (!(h->max_speed > 0)) {
                r = fail(&c, "limits.maxSpeed",
                         "is required: the gate clamps every actuator's value to it", NULL);
                goto out;
        }
        for (size_t i = 0; i < h->n_per; i++) {
                const struct policy_hw_limit *l = &h->per[i];
                if (l->max_speed > h->max_speed ||
                    (h->max_accel > 0 && l->max_accel > h->max_accel)) {
                        snprintf(c.path + strlen(c.path), sizeof(c.path) - strlen(c.path),
                                 ".limits.actuators.%s", l->name);
                        r = fail(&c, NULL,
                                 "may only tighten the global limits (a larger maxSpeed or "
                                 "maxAcceleration is refused)",
                                 NULL);
                        goto out;
                }
        }
out:
        if (r < 0)
                policy_hardware_clear(h);
        return r;
}

int policy_hardware_from_text(const char *text, struct policy_hardware *ret, struct al_error *err)
{
        json_error_t jerr;
        json_t *v = json_loads(text ? text : "", JSON_REJECT_DUPLICATES, &jerr);
        if (!v) {
                memset(ret, 0, sizeof(*ret));
                return al_error_set_message(err, EINVAL, "hardware: %s", jerr.text);
        }
        int r = policy_hardware_parse(v, "hardware", ret, err);
        json_decref(v);
        return r;
}

bool policy_hardware_actuator_allowed(const struct policy_hardware *h, const char *name)
{
        return in_list(h->act_allow, h->n_act_allow, name) &&
               !in_list(h->act_deny, h->n_act_deny, name);
}

bool policy_hardware_sensor_allowed(const struct policy_hardware *h, const char *name)
{
        return !in_list(h->sensors_deny, h->n_sensors_deny, name);
}

void policy_hardware_limits(const struct policy_hardware *h, const char *name, double *max_speed,
                            double *max_accel)
{
        *max_speed = h->max_speed;
        *max_accel = h->max_accel;
        for (size_t i = 0; i < h->n_per; i++)
                if (STREQ(h->per[i].name, name)) {
                        if (h->per[i].max_speed > 0)
                                *max_speed = h->per[i].max_speed;
                        if (h->per[i].max_accel > 0)
                                *max_accel = h->per[i].max_accel;
                }
}

int policy_hardware_load_file(struct policy *p, const char *path, struct al_error *err)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = read_file_at(AT_FDCWD, path, 1u << 20, &text, &len);
        if (r < 0)
                return al_error_set(err, -r, "reading the hardware file \"%s\"", path);
        json_error_t jerr;
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *hw = json_object_get(doc, "hardware");
        if (!json_is_object(doc) || !hw || json_object_size(doc) != 1) {
                json_decref(doc);
                return al_error_set_message(err, EINVAL,
                                            "%s: must be {\"hardware\": {...}} and nothing else "
                                            "(docs/hardware.md)",
                                            path);
        }
        struct policy_hardware h;
        r = policy_hardware_parse(hw, "hardware", &h, err);
        if (r < 0) {
                json_decref(doc);
                return al_error_wrap(err, "%s", path);
        }
        policy_hardware_clear(&h);
        char *s = json_dumps(hw, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
        json_decref(doc);
        if (!s)
                return al_error_set(err, ENOMEM, "%s", path);
        free(p->hardware_json);
        p->hardware_json = s;
        return 0;
}
