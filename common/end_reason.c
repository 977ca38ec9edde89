/* The end reasons' name table (common/end_reason.h). */
#include "common/end_reason.h"

#include "common/macro.h"

#include <errno.h>
#include <string.h>

static const char *const names[END_REASON_MAX] = {
    [END_EXITED] = "exited",
    [END_SIGNALED] = "signaled",
    [END_COMMAND_TIMEOUT] = "command_timeout",
    [END_OOM_KILLED] = "oom_killed",
    [END_IDLE_TIMEOUT] = "idle_timeout",
    [END_LIFETIME_EXCEEDED] = "lifetime_exceeded",
    [END_COST_LIMIT] = "cost_limit",
    [END_TERMINATED] = "terminated",
    [END_INFRASTRUCTURE_FAILURE] = "infrastructure_failure",
    [END_PIDS_LIMIT] = "pids_limit",
    [END_MOVED] = "moved",
};

const char *end_reason_name(end_reason r) {
    return (unsigned)r < END_REASON_MAX ? names[r] : NULL;
}

int end_reason_from_name(const char *s) {
    for (size_t i = 0; s && i < ARRAY_SIZE(names); i++)
        if (strcmp(names[i], s) == 0)
            return (int)i;
    return -EINVAL;
}
