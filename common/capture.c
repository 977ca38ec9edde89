/* Running a helper program and keeping its output (see capture.h). */
#include "common/capture.h"

#include "common/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

/* Read p into out until the end, the buffer is full or (deadline_ms >= 0) the time is up. */
static bool read_until(int p, int deadline_ms, char *out, size_t len) {
    size_t n = 0;
    uint64_t end = now_mono_ms() + (uint64_t)(deadline_ms < 0 ? 0 : deadline_ms);
    bool timed_out = false;
    while (n + 1 < len) {
        if (deadline_ms >= 0) {
            uint64_t now = now_mono_ms();
            struct pollfd pfd = {.fd = p, .events = POLLIN};
            if (now >= end || poll(&pfd, 1, (int)(end - now)) == 0) {
                timed_out = true;
                break;
            }
        }
        ssize_t k = read(p, out + n, len - 1 - n);
        if (k == 0 || (k < 0 && errno != EINTR))
            break;
        n += k > 0 ? (size_t)k : 0;
    }
    out[n] = 0;
    return timed_out;
}

int capture_run(char *const argv[], char *const envp[], bool with_stderr, int deadline_ms,
                char *out, size_t len, int *ret_status) {
    int p[2];
    out[0] = 0;
    if (pipe2(p, O_CLOEXEC) < 0)
        return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    if (with_stderr)
        posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    else
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (r != 0) {
        close(p[0]);
        return -r;
    }
    bool timed_out = read_until(p[0], deadline_ms, out, len);
    close(p[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (timed_out)
        return -ETIMEDOUT;
    *ret_status = st;
    return 0;
}
