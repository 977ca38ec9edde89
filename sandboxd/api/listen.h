/* The API's listening sockets (unix, TCP, systemd socket activation) and sd_notify. */
#pragma once

#include "common/error.h"

#include <stdbool.h>

int sd_listen_unix(const char *path, int *ret_fd, error_rec *err);
/* `what`: the flag that named hostport, for messages ("--tcp"). */
int sd_listen_tcp(const char *what, const char *hostport, int *ret_fd, error_rec *err);
int sd_listen_activated(void);
/* Whether a bound socket listens on a loopback address only. */
bool sd_listen_is_loopback(int fd);
void sd_notify_ready(void);
