/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"

/* The microvm tier (docs/tiers.md): the command runs in its own kernel
 * under QEMU, which itself runs inside Airlock's namespace sandbox. */

/* Where `make deps` puts the guest kernel (vmlinuz, modules/order and the
 * modules it lists), taken from Debian's linux-image package. */
#ifndef AIRLOCK_VM_DIR
#define AIRLOCK_VM_DIR "/usr/local/share/airlock/vm"
#endif
#define TIER_QEMU_PATH "/usr/bin/qemu-system-x86_64"
/* The operator's consent to software emulation where KVM cannot run a
 * stock kernel: AIRLOCK_MICROVM_ACCEL=tcg. */
#define TIER_MICROVM_ACCEL_ENV "AIRLOCK_MICROVM_ACCEL"

/* A tier refused here: the reason (and its fix) in why, -EOPNOTSUPP. */
int tier_refuse(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

enum tier_vm_accel {
        TIER_VM_ACCEL_NONE = 0,
        TIER_VM_ACCEL_KVM,
        TIER_VM_ACCEL_TCG,
};

/* What this host offers (QEMU, the guest kernel, an accelerator): 0 and
 * *ret_accel, or -EOPNOTSUPP with the reason and the fix in why. */
int tier_microvm_host(enum tier_vm_accel *ret_accel, char *why, size_t n);

/* Whether KVM can run a stock guest kernel here: 0, or -EOPNOTSUPP with
 * the reason (no /dev/kvm, no access, a paravirtual KVM). */
int tier_microvm_kvm(char *why, size_t n);

/* airlock doctor's checks for the tier (probe.h): kvm-guest, qemu,
 * guest-kernel, accel, appended at c[*n]. */
struct probe_check;
void tier_microvm_probe(struct probe_check *c, size_t *n);

/* In the parent, before the sandbox: the host check and what the policy
 * asks that the tier cannot give (a network, an image). Remembers the
 * accelerator for tier_microvm_exec() in the sandbox's command process. */
int tier_microvm_prepare(const struct policy *p, struct al_error *err);

/* Whether the sandbox needs /dev/kvm (the accelerator chosen by the last
 * tier_microvm_prepare() in this process is KVM). */
bool tier_microvm_wants_kvm(void);

struct tier_vm_run {
        const struct policy *policy;
        char *const *argv;
        char *const *envp;
        const char *cwd;
        uid_t uid;
        gid_t gid;
        int errfd; /* the spawn's exec-error channel (close-on-exec) */
        bool ctty; /* a terminal was asked for (-t): refused, the guest has none */
};

/* In the sandbox's command process, in place of execve: writes the guest's
 * initramfs, starts QEMU and waits for it, then ends this process with the
 * guest command's exit status (125 with the guest console's tail on stderr
 * when the guest reported none). Returns only when QEMU could not be
 * started, with `err` set and *ret_exec_errno as execve's. */
int tier_microvm_exec(const struct tier_vm_run *r, int *ret_exec_errno, struct al_error *err);
