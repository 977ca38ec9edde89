/* A sandbox's life: start (spec.json, sbx-shim, its start-up line, hello), events from the
 * shim, re-adoption after a restart, the typed end, and the news told to the listeners
 * (core/context.h). */
#pragma once

#include "common/macro.h"
#include "sandboxd/core/sandbox.h"

/* Start sb now when a start slot is free, else queue it (started in creation order). */
void sd_sandbox_start_or_queue(sd_sandbox *sb);
/* End sb (idempotent): the listeners hear it, its network and shim go, its record is saved. */
void sd_sandbox_end(sd_sandbox *sb, end_reason reason, const char *fmt, ...) _printf_(3, 4);
/* Pause to disk (core/checkpoint.c): sb (running, its shim gone after saving it) is paused;
 * paused sb starts again from its checkpoint (queued as a create; "resuming", a failure makes
 * it paused again and is told through create_finished). */
void sd_sandbox_set_paused(sd_sandbox *sb);
void sd_sandbox_resume(sd_sandbox *sb);
/* The shim of sb's resume is lost (a restarted daemon finds none, or it went away before its
 * hello): what a shim of it may still restore or run is cleaned up (`sbx-shim cleanup`, the uid
 * slot kept) and sb is paused again. */
void sd_sandbox_resume_lost(sd_sandbox *sb);
/* A pause of sb begins: the listeners hear it (sd_listener.pausing). */
void sd_sandbox_tell_pausing(sd_sandbox *sb);
/* An API call or a command: the idle timeout starts again. */
void sd_sandbox_touch(sd_sandbox *sb);
/* A connection through the port proxy opens or closes: while one is open the sandbox is not
 * idle (as while a command runs); the idle timeout starts again when the last one closes. */
void sd_sandbox_connection(sd_sandbox *sb, bool open);
/* A new lifetime from now (saved). */
void sd_sandbox_set_timeout(sd_sandbox *sb, uint64_t ms);
/* A warm pool entry handed out: its clock, usage and cost start now. */
void sd_sandbox_restart_clock(sd_sandbox *sb);
/* Ask the shim for usage stats (stored when the answer comes). */
void sd_sandbox_refresh_stats(sd_sandbox *sb);
/* Connect to the running shim of a restored sandbox and say hello. */
int sd_sandbox_adopt(sd_sandbox *sb, error_rec *err);
/* Take sb out of the table and free it (an ended sandbox, or one never started). */
void sd_sandbox_forget(sd_sandbox *sb);
/* A sandbox just added that never started, whose record could not be saved (create, fork, a
 * pool entry): its record, uid slot and registry entry go (sb is freed). */
void sd_sandbox_discard(sd_sandbox *sb);
/* Free sb's memory only (the daemon exits). */
void sd_sandbox_free(sd_sandbox *sb);
/* SIGTERM: save the running sandboxes and stop listening to their shims (they keep running). */
void sd_lifecycle_stop(sd_daemon *d);
