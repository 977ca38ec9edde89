/* libsbx's attached process (internal): the state of one WebSocket stream to a command, shared
 * by the synchronous API (process.c, a poll loop) and the asynchronous one (process_async.c, a
 * uv_poll on the same socket). */
#pragma once

#include "client/lib/internal.h"
#include "client/lib/ws.h"

enum sbxi_proc_state {
    SBXI_PROC_HANDSHAKE, /* request queued or sent, reading the answer's head */
    SBXI_PROC_STARTING,  /* upgraded, waiting for {"type":"start"} */
    SBXI_PROC_RUNNING,
    SBXI_PROC_DONE, /* exit record, close or failure */
};

/* What the async form hears about (hook). RECONNECT: a redirect is followed, the socket behind
 * fd is about to be replaced (under the same number): stop watching it until the next round. */
enum sbxi_proc_event {
    SBXI_PROC_EV_STARTED,
    SBXI_PROC_EV_DONE,
    SBXI_PROC_EV_QUEUED,
    SBXI_PROC_EV_RECONNECT
};

/* Stdin bytes per frame (the daemon refuses frames over 1 MiB). */
#define SBXI_PROC_STDIN_FRAME (256u * 1024)

struct sbx_process {
    sbx_client *client; /* its endpoint is client->eps[ep] (eps may move: a fleet node joins) */
    size_t ep;
    char *bearer; /* the token for a TCP endpoint (sent again when a redirect is followed) */
    int fd;
    int redirects;  /* followed so far (a fleet node sends the stream to the sandbox's node) */
    size_t hs_left; /* bytes of the upgrade request at the front of out not sent yet; what
                     * follows them waits for the upgrade */
    enum sbxi_proc_state state;
    bool expect_start; /* a started command (not an attach): wait for the start message */
    char key[25];
    sbxi_buf out;    /* bytes to send */
    sbxi_buf head;   /* the answer's head (and a refusal's body) */
    char *first_msg; /* the exec body, sent once upgraded */
    sbxi_ws_parser parser;
    long pid;
    sbx_output_cb on_output;
    void *userdata;
    bool got_exit, sent_close, stdin_closed;
    sbx_exec_result result;
    sbx_err err; /* the failure, once failed */
    bool failed;
    char last_error[256]; /* the last {"type":"error"} the daemon sent (the stream went on) */
    char exit_error[256]; /* an exit record with reason "error": its message (the sandbox ended
                           * under the command, docs/API.md); "" for any other end */
    /* async form */
    void (*hook)(sbx_process *p, enum sbxi_proc_event ev);
    void *async;                     /* process_async.c's state */
    void (*on_free)(sbx_process *p); /* set by the async form: it frees on the loop */
};

/* Connect to sb's endpoint and queue the upgrade request for path. first_msg (taken, may be
 * NULL) is sent as a text frame once upgraded. */
sbx_code sbxi_process_open(sbx_sandbox *sb, const char *path, char *first_msg,
                           sbx_output_cb on_output, void *userdata, sbx_process **ret,
                           sbx_err *err);
/* One non-blocking round on the socket for the events poll reported. */
sbx_code sbxi_process_io(sbx_process *p, short revents);
short sbxi_process_events(const sbx_process *p);
/* The body of an exec with the terminal fields ("tty", "tty_size", "term"), and "background"
 * when set; stdin is left out when strip_stdin. */
char *sbxi_process_body(const sbx_exec_opts *exec, const sbx_process_opts *popts, bool background,
                        bool strip_stdin, sbx_err *err);
/* Free the process's memory (the socket closed). */
void sbxi_process_release(sbx_process *p);
/* "/v1/sandboxes/ID/processes/PID<suffix>"; NULL on OOM. */
char *sbxi_process_path(const sbx_sandbox *sb, long pid, const char *suffix);
/* ".../processes/PID/attach?stdin=1&replay=1" as flags say; NULL on OOM. */
char *sbxi_process_attach_path(const sbx_sandbox *sb, long pid, unsigned flags);
