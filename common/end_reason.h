/* Why a command or a sandbox ended: one enum and one name table for the shim (a command's exit
 * event), the daemon (a sandbox's end, metrics, state files) and the API's JSON. */
#pragma once

typedef enum end_reason {
    /* a command's end (the shim's exit event) */
    END_EXITED,
    END_SIGNALED,
    END_COMMAND_TIMEOUT,
    END_OOM_KILLED,
    /* a sandbox's end (the daemon) */
    END_IDLE_TIMEOUT,
    END_LIFETIME_EXCEEDED,
    END_COST_LIMIT,
    END_TERMINATED,
    END_INFRASTRUCTURE_FAILURE,
    END_PIDS_LIMIT, /* gvisor: gVisor's threads met the host's pids limit (shim/gvisor.h) */
    END_MOVED,      /* paused here, resumed on another node of the fleet (api/move.c) */
    END_REASON_MAX
} end_reason;

/* The API's name ("exited", ..., "infrastructure_failure"); NULL out of range. */
const char *end_reason_name(end_reason r);
/* The reason named s, or -EINVAL (s NULL or unknown). */
int end_reason_from_name(const char *s);
