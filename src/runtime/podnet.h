/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"
#include "policy.h"
#include "runtime.h"

/* A gated container of a pod (docs/kubernetes.md, "A gated container in a
 * pod"): its processes keep a network namespace of their own, holding
 * only loopback, the gate's listeners and its name server; the gates'
 * process makes every connection it allows from the pod's network
 * namespace, and resolves with the pod's resolver. The container's
 * /etc/resolv.conf names the gate's name server. */

#define RUNTIME_RESOLV      "resolv.conf" /* in --root: "nameserver 127.0.0.1" */
#define RUNTIME_RESOLV_TEXT "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n"

/* Before policy_finalize, for a policy that will be gated: the spec's bind mount at
 * /etc/resolv.conf (the pod's, which the CRI adds) gets the gate's resolver
 * file as its source, its own source kept in *ret_pod_resolv for the gates;
 * without one, the file is bound over the image's /etc/resolv.conf when
 * that is a regular file (`root` is the image's root on the host). */
int rt_podnet_resolv(const struct rt_globals *g, struct policy *p, const char *root,
                     char **ret_pod_resolv, struct al_error *err);
/* In the gates' process: the pod's resolv.conf (if any) over
 * /etc/resolv.conf in a mount namespace of its own, then the pod's network
 * namespace (`netns_fd`), where every socket made from now on lives. */
int rt_podnet_enter(int netns_fd, const char *pod_resolv, struct al_error *err);
