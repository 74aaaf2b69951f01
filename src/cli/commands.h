/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Each subcommand of `airlock` parses its own arguments (argv[0] is the
 * subcommand's name), prints its own messages, and returns the exit code. */
int cmd_run(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_accept(int argc, char **argv);
int cmd_discard(int argc, char **argv);
int cmd_review(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_supervise(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_grant(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_volume(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_ui(int argc, char **argv);
int cmd_caps(int argc, char **argv);
int cmd_estop(int argc, char **argv);
int cmd_approvals(int argc, char **argv);
int cmd_agent(int argc, char **argv);
