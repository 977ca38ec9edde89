/* /run_jupyter's driver (sf_jupyter.h): the Python program the daemon runs in the request's
 * sandbox as `python3 -c`, with the request on its stdin, and what its answer (JSON on its
 * stdout) makes of the response. Calls nothing above it. */
#include "sandboxd/api/sf_jupyter.h"

#include <string.h>

/* Runs the cells in a python3 kernel (jupyter_client over ipc sockets: no network needed) and
 * prints {"status","cells":[{stdout,stderr,display,error}]} as JSON. Input: the request. Whatever
 * happens, what started ends before the interpreter does (the client's channels, the kernel, the
 * client's zmq context), so a kernel that dies or cannot start leaves its error as the one
 * traceback (left to the interpreter's teardown, their __del__ ran on cleared globals: "'NoneType'
 * object is not callable" tracebacks on stderr after the real one, and after every request
 * before the driver ended them itself). The kernel's debugger (debugpy) does not check for frozen
 * modules: its four-line warning, twice, was on every answer's stderr. */
static const char jupyter_driver[] =
    "import json, os, sys, time\n"
    "from jupyter_client.manager import KernelManager\n"
    "\n"
    "def run(kc, req):\n"
    "    cells, status = [], 'Finished'\n"
    "    deadline = time.monotonic() + (req.get('total_timeout') or 1e9)\n"
    "    for code in req['cells']:\n"
    "        out = {'stdout': '', 'stderr': '', 'display': [], 'error': []}\n"
    "        msg_id = kc.execute(code)\n"
    "        cell_end = time.monotonic() + (req.get('cell_timeout') or 1e9)\n"
    "        while True:\n"
    "            left = min(deadline, cell_end) - time.monotonic()\n"
    "            if left <= 0:\n"
    "                status = 'TimeLimitExceeded'; break\n"
    "            try:\n"
    "                m = kc.get_iopub_msg(timeout=left)\n"
    "            except Exception:\n"
    "                continue\n"
    "            if m['parent_header'].get('msg_id') != msg_id:\n"
    "                continue\n"
    "            t, c = m['msg_type'], m['content']\n"
    "            if t == 'stream':\n"
    "                out[c['name']] += c['text']\n"
    "            elif t in ('display_data', 'execute_result'):\n"
    "                out['display'].append(c['data'])\n"
    "            elif t == 'error':\n"
    "                out['error'].append({'ename': c['ename'], 'evalue': c['evalue'],\n"
    "                                     'traceback': c['traceback']})\n"
    "            elif t == 'status' and c['execution_state'] == 'idle':\n"
    "                break\n"
    "        cells.append(out)\n"
    "        if status != 'Finished':\n"
    "            break\n"
    "    return status, cells\n"
    "\n"
    "os.environ['PYDEVD_DISABLE_FILE_VALIDATION'] = '1'  # (for the kernel's debugpy)\n"
    "req = json.load(sys.stdin)\n"
    "km = KernelManager(kernel_name='python3', transport='ipc', ip='/tmp/kernel')\n"
    "kc = None\n"
    "try:\n"
    "    km.start_kernel(cwd='/workspace')\n"
    "    kc = km.client()\n"
    "    kc.start_channels()\n"
    "    kc.wait_for_ready(timeout=60)\n"
    "    status, cells = run(kc, req)\n"
    "    print(json.dumps({'status': status, 'cells': cells}))\n"
    "    sys.stdout.flush()\n"
    "finally:\n"
    "    if kc is not None:\n"
    "        kc.stop_channels()\n"
    "    if km.has_kernel:\n"
    "        km.shutdown_kernel(now=True)\n"
    "    if kc is not None:\n"
    "        kc.context.destroy()\n";

json_t *sd_sf_jupyter_argv(void) {
    return json_pack("[sss]", "python3", "-c", jupyter_driver);
}

bool sd_sf_jupyter_answer(json_t *resp, json_t *driver, const char *out) {
    json_object_set_new(resp, "driver", json_incref(driver));
    json_t *ans = out ? json_loads(out, 0, NULL) : NULL;
    const char *st = json_string_value(json_object_get(ans, "status"));
    const char *drv = json_string_value(json_object_get(driver, "status"));
    bool answered = true;
    if (drv && strcmp(drv, "TimeLimitExceeded") == 0)
        json_object_set_new(resp, "status", json_string("Failed"));
    else if (!st)
        answered = false;
    else if (strcmp(st, "Finished") != 0)
        json_object_set_new(resp, "status", json_string("Failed"));
    else
        json_object_set(resp, "cells", json_object_get(ans, "cells"));
    json_decref(ans);
    return answered;
}
