/* The API's listening sockets (unix, TCP, systemd socket activation) and sd_notify. */
#pragma once

#include "common/error.h"

int sd_listen_unix(const char *path, int *ret_fd, error_rec *err);
int sd_listen_tcp(const char *hostport, int *ret_fd, error_rec *err);
int sd_listen_activated(void);
void sd_notify_ready(void);
