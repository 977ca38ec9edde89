/* libsbx error codes and their names. */
#include <sbx.h>

const char *sbx_code_name(sbx_code code) {
    static const char *const names[] = {
        [SBX_OK] = "ok",
        [SBX_E_INVALID] = "invalid_argument",
        [SBX_E_NOT_FOUND] = "not_found",
        [SBX_E_CONFLICT] = "conflict",
        [SBX_E_TOO_LARGE] = "too_large",
        [SBX_E_UNAVAILABLE] = "unavailable",
        [SBX_E_CONNECT] = "connect_failed",
        [SBX_E_AUTH] = "unauthorized",
        [SBX_E_SERVER] = "server_error",
        [SBX_E_PROTOCOL] = "protocol_error",
        [SBX_E_NOMEM] = "out_of_memory",
        [SBX_E_IO] = "io_error",
    };
    if ((unsigned)code < sizeof(names) / sizeof(names[0]) && names[code])
        return names[code];
    return "unknown";
}
