/* Unit tests of a command's last steps before its execve (shim/exec_path.h): the walk of
 * /proc/self/fd that marks descriptors close-on-exec where close_range cannot (Linux < 5.11). */
#include "shim/exec_path.h"
#include "tests/lib/test.h"

#include <fcntl.h>
#include <unistd.h>

TEST(shim_cloexec_walk_marks_every_fd_from_low) {
    int fds[6];
    for (int i = 0; i < 6; i++) {
        fds[i] = open("/dev/null", O_RDONLY); /* not close-on-exec */
        CHECK(fds[i] >= 3);
    }
    CHECK(dup2(fds[0], 700) == 700); /* far above the others */
    int low = fds[2];
    CHECK_OK(shim_exec_cloexec_walk(low));
    for (int i = 0; i < 6; i++)
        CHECK_EQ(fcntl(fds[i], F_GETFD) & FD_CLOEXEC, fds[i] >= low ? FD_CLOEXEC : 0);
    CHECK_EQ(fcntl(700, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    CHECK_EQ(fcntl(0, F_GETFD) & FD_CLOEXEC, 0);
    CHECK_OK(shim_exec_cloexec_from(3)); /* close_range, or the walk */
    for (int i = 0; i < 6; i++)
        CHECK_EQ(fcntl(fds[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    for (int i = 0; i < 6; i++)
        close(fds[i]);
    close(700);
}
