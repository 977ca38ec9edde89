/* hello.c: the libsbx synchronous flow in one page. Creates a sandbox, writes a script into it,
 * runs it with live output, reads a file it made, and terminates the sandbox.
 *
 *   cc hello.c $(pkg-config --cflags --libs libsbx) -o hello
 *   ./hello                      # the daemon at $SBX_HOST or /run/sandboxd/sandboxd.sock
 *   ./hello unix:/tmp/sd.sock    # or any endpoint list */
#include <sbx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_output(void *userdata, enum sbx_stream stream, const char *data, size_t len) {
    (void)userdata;
    fwrite(data, 1, len, stream == SBX_STREAM_STDERR ? stderr : stdout);
    fflush(stream == SBX_STREAM_STDERR ? stderr : stdout);
}

static int fail(const char *what, const sbx_err *err) {
    fprintf(stderr, "hello: %s: %s (%s)\n", what, err->message, sbx_code_name(err->code));
    return 1;
}

int main(int argc, char **argv) {
    sbx_client *client = NULL;
    sbx_sandbox *sb = NULL;
    sbx_err err;
    int rc = 1;

    if (sbx_client_new(argc > 1 ? argv[1] : NULL, &client, &err) != SBX_OK)
        return fail("client", &err);

    sbx_create_opts opts;
    sbx_create_opts_init(&opts);
    opts.memory = 256ull << 20; /* 256Mi */
    opts.timeout_ms = 10 * 60 * 1000;
    const char *labels[] = {"example=hello", NULL};
    opts.labels = labels;
    if (sbx_sandbox_create(client, &opts, &sb, &err) != SBX_OK) {
        rc = fail("create", &err);
        goto out;
    }
    printf("sandbox %s\n", sbx_sandbox_id(sb));

    const char script[] = "echo \"hello from $(hostname), uid $(id -u)\"\n"
                          "echo 42 > /workspace/answer.txt\n";
    if (sbx_sandbox_write_file(sb, "/workspace/hello.sh", script, strlen(script), &err) != SBX_OK) {
        rc = fail("write_file", &err);
        goto out;
    }

    sbx_exec_opts ex;
    sbx_exec_opts_init(&ex);
    const char *cmd[] = {"sh", "/workspace/hello.sh", NULL};
    ex.argv = cmd;
    ex.timeout_ms = 30000;
    ex.on_output = print_output; /* stream output as it happens */
    sbx_exec_result res;
    if (sbx_sandbox_exec(sb, &ex, &res, &err) != SBX_OK) {
        rc = fail("exec", &err);
        goto out;
    }
    printf("exit %d (%s) in %.3fs\n", res.exit_code, res.reason, res.duration_s);
    sbx_exec_result_free(&res);

    void *data = NULL;
    size_t len = 0;
    if (sbx_sandbox_read_file(sb, "/workspace/answer.txt", &data, &len, &err) != SBX_OK) {
        rc = fail("read_file", &err);
        goto out;
    }
    printf("answer.txt: %.*s", (int)len, (const char *)data);
    free(data);
    rc = 0;

out:
    if (sb && sbx_sandbox_terminate(sb, &err) != SBX_OK)
        rc = fail("terminate", &err);
    sbx_sandbox_free(sb);
    sbx_client_free(client);
    return rc;
}
