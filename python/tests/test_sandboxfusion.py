"""The SandboxFusion-compatible endpoints, called with requests the way verl's sandbox_fusion
reward and tool send them (POST {url}/run_code with a JSON body)."""
import base64
import hashlib
import io
import concurrent.futures
import os
import shutil
import subprocess
import time
import zipfile

import pytest
import requests

URL = os.environ.get("SANDBOXD_SF_URL", "")


@pytest.fixture(autouse=True)
def need_url():
    if not URL:
        pytest.fail("SANDBOXD_SF_URL is not set")


def run_code(**body):
    body.setdefault("compile_timeout", 10)
    body.setdefault("run_timeout", 10)
    r = requests.post(f"{URL}/run_code", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_ping():
    r = requests.get(f"{URL}/v1/ping", timeout=10)
    assert r.status_code == 200 and r.json() == "pong"


def test_success_schema():
    out = run_code(code="print(int(input()) * 2)", language="python", stdin="21\n",
                   memory_limit_MB=1024)
    assert out["status"] == "Success" and out["message"] == ""
    assert set(out) >= {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    rr = out["run_result"]
    assert rr["status"] == "Finished" and rr["return_code"] == 0 and rr["stdout"] == "42\n"
    assert rr["stderr"] == "" and isinstance(rr["execution_time"], float)
    assert out["compile_result"] is None and out["files"] == {}
    assert out["executor_pod_name"].startswith("sb-")


def test_wrong_answer_is_success_with_other_output():
    # verl compares stdout itself: a wrong answer still ran fine
    out = run_code(code="print(41)", language="python")
    assert out["status"] == "Success" and out["run_result"]["stdout"] == "41\n"


def test_bash_nonzero_exit_is_failed():
    out = run_code(code="echo partial; exit 3", language="bash")
    assert out["status"] == "Failed"
    assert out["run_result"]["return_code"] == 3 and out["run_result"]["stdout"] == "partial\n"


def test_cpp_compile_error():
    out = run_code(code="int main() { return undeclared; }", language="cpp")
    assert out["status"] == "Failed" and out["run_result"] is None
    cr = out["compile_result"]
    assert cr["status"] == "Finished" and cr["return_code"] != 0 and "undeclared" in cr["stderr"]


def test_cpp_runs():
    out = run_code(code="#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a+b<<std::endl;}",
                   language="cpp", stdin="2 3")
    assert out["status"] == "Success", out
    assert out["compile_result"]["return_code"] == 0 and out["run_result"]["stdout"] == "5\n"


def test_cpp_is_compiled_as_sandboxfusion_compiles_it():
    # SandboxFusion runs g++ -std=c++17 without -O: optimization changes what a program with
    # undefined behaviour does (a signed-overflow loop that ends at -O0 runs forever at -O2)
    code = ("#include <cstdio>\nint main(){\n#ifdef __OPTIMIZE__\nstd::puts(\"optimized\");\n"
            "#else\nstd::puts(\"not optimized\");\n#endif\nstd::printf(\"%ld\\n\", __cplusplus);}\n")
    out = run_code(code=code, language="cpp")
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == "not optimized\n201703\n", out


def test_cpp_links_openssl_and_pthread_as_sandboxfusion_does():
    # SandboxFusion links -lcrypto -lssl -lpthread, each when the image has it; the test image
    # is the host's /usr, which has them (libssl-dev, tests/deps.sh)
    if not shutil.which("g++") or not os.path.exists("/usr/include/openssl/ssl.h"):
        pytest.skip("SKIP (prerequisite missing): g++ and libssl-dev (tests/deps.sh)")
    code = """#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <cstdio>
#include <thread>
int main() {
    unsigned char d[SHA256_DIGEST_LENGTH];
    std::thread t([&] { SHA256(reinterpret_cast<const unsigned char *>("abc"), 3, d); });
    t.join();
    std::printf("%d %02x%02x\\n", OPENSSL_init_ssl(0, nullptr), d[0], d[1]);
}
"""
    out = run_code(code=code, language="cpp", compile_timeout=60)
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == "1 ba78\n", out


def test_runtime_error():
    out = run_code(code="raise ValueError('boom')", language="python")
    assert out["status"] == "Failed"
    assert out["run_result"]["return_code"] == 1 and "ValueError: boom" in out["run_result"]["stderr"]


def test_timeout():
    out = run_code(code="import time\nprint('started', flush=True)\ntime.sleep(30)", language="python",
                   run_timeout=1)
    assert out["status"] == "Failed"
    rr = out["run_result"]
    assert rr["status"] == "TimeLimitExceeded" and rr["stdout"] == "started\n"


def test_run_output_kept_up_to_1_mib_per_stream_as_sandboxfusion():
    # SandboxFusion's run_command_bare keeps the first MiB of stdout and of stderr, each, for the
    # compile and for the run, and reads the rest (the program is not stopped); 64 MiB were kept
    code = ("import sys\nsys.stdout.write('a' * (3 << 20)); sys.stdout.flush()\n"
            "sys.stderr.write('b' * ((1 << 20) + 7)); sys.stderr.flush()\nprint('end', file=sys.stderr)")
    out = run_code(code=code, language="python")
    rr = out["run_result"]
    assert out["status"] == "Success" and rr["return_code"] == 0, {k: rr[k] for k in ("status", "return_code")}
    assert (len(rr["stdout"]), len(rr["stderr"])) == (1 << 20, 1 << 20)
    assert rr["stdout"] == "a" * (1 << 20) and rr["stderr"] == "b" * (1 << 20)


def test_compile_output_kept_up_to_1_mib_as_sandboxfusion():
    # the compile's streams too: g++ echoes each #warning line twice, some 2.4 MiB of warnings
    code = "".join(f"#warning {i} {'w' * 1000}\n" for i in range(1200)) + "int main() { return 0; }\n"
    out = run_code(code=code, language="cpp", compile_timeout=60)
    cr = out["compile_result"]
    assert out["status"] == "Success" and cr["return_code"] == 0, {k: cr[k] for k in ("status", "return_code")}
    assert len(cr["stderr"]) == 1 << 20 and cr["stderr"].count("warning: #warning") > 100


def test_memory_limit_exceeded():
    out = run_code(code="x = bytearray(400 << 20)\nprint(len(x))", language="python", memory_limit_MB=128)
    assert out["status"] == "Failed"
    rr = out["run_result"]
    assert rr["status"] == "Finished" and rr["return_code"] != 0 and rr["stdout"] == ""
    # the same program fits when the limit allows it
    out = run_code(code="x = bytearray(50 << 20)\nprint(len(x))", language="python", memory_limit_MB=512)
    assert out["status"] == "Success"


def test_files_in_fetch_files_out():
    files = {"data/in.txt": base64.b64encode(b"from the caller").decode(),
             "/tmp/abs.bin": base64.b64encode(bytes(range(256))).decode()}
    code = ("import os\n"
            "print(open('data/in.txt').read(), len(open('/tmp/abs.bin','rb').read()))\n"
            "open('result.txt','w').write('written')\n"
            "open('/tmp/raw','wb').write(bytes([0,255,1]))\n")
    out = run_code(code=code, language="python", files=files,
                   fetch_files=["result.txt", "/tmp/raw", "missing.txt"])
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == "from the caller 256\n"
    assert base64.b64decode(out["files"]["result.txt"]) == b"written"
    assert base64.b64decode(out["files"]["/tmp/raw"]) == bytes([0, 255, 1])
    assert "missing.txt" not in out["files"]


def test_files_in_wrapped_base64():
    # base64 in lines (Python's encodebytes, MIME), as SandboxFusion's b64decode takes it (it was
    # a 422 "not valid base64"); anything else that is not base64 still is (the 422 test below)
    data = bytes(range(256)) * 3
    wrapped = base64.encodebytes(data).decode()
    assert "\n" in wrapped.rstrip("\n")
    files = {"w.bin": wrapped, "crlf.txt": base64.encodebytes(b"two lines").decode().replace("\n", "\r\n")}
    code = ("import hashlib\n"
            "print(hashlib.sha256(open('w.bin','rb').read()).hexdigest(), open('crlf.txt').read())\n")
    out = run_code(code=code, language="python", files=files)
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == hashlib.sha256(data).hexdigest() + " two lines\n", out


def test_fetch_file_named_dash():
    # "-" is the file of that name in the working directory, as SandboxFusion's os.path.join
    # reads it (it was returned empty: `cat -- -` read cat's empty stdin)
    out = run_code(code="open('-','w').write('dash')\nopen('/tmp/-','w').write('abs')\n",
                   language="python", fetch_files=["-", "/tmp/-"])
    assert out["status"] == "Success", out
    assert base64.b64decode(out["files"]["-"]) == b"dash", out
    assert base64.b64decode(out["files"]["/tmp/-"]) == b"abs", out


def test_fetch_files_regular_files_only():
    # SandboxFusion returns only what os.path.isfile takes (links followed); a FIFO hung the
    # fetch for its 60 s and was then left out, /dev/zero made the request a SandboxError
    code = ("import os\nos.mkfifo('fifo')\nos.mkdir('dir')\nopen('f','w').write('reg')\n"
            "os.symlink('f','link')\n")
    t0 = time.monotonic()
    out = run_code(code=code, language="python",
                   fetch_files=["fifo", "dir", "/dev/zero", "f", "link", "missing"])
    assert out["status"] == "Success", out
    assert sorted(out["files"]) == ["f", "link"], out
    assert base64.b64decode(out["files"]["link"]) == b"reg", out
    assert time.monotonic() - t0 < 30, "the fetch waited on the FIFO"


def test_files_named_ignore_this_file_are_skipped():
    # SandboxFusion's restore_files skips every path with IGNORE_THIS_FILE in it, before
    # decoding it (they were written, and one that was not base64 was a 422)
    files = {"IGNORE_THIS_FILE": base64.b64encode(b"x").decode(),
             "d/a_IGNORE_THIS_FILE.txt": base64.b64encode(b"y").decode(),
             "ignore_this_file": base64.b64encode(b"lower case is written").decode()}
    code = ("import os\n"
            "print(os.path.exists('IGNORE_THIS_FILE'), os.path.exists('d'),"
            " open('ignore_this_file').read())\n")
    out = run_code(code=code, language="python", files=files)
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == "False False lower case is written\n", out
    out = run_code(code="print(1)", language="python", files={"x/IGNORE_THIS_FILE": "not base64!"})
    assert out["status"] == "Success", out


# with the run command as its exec's "file" (up to 48 KiB once escaped as JSON) / by a write of
# its own first: 47,000 '#' go with the run; 33,000 newlines (66,000 bytes escaped: more than
# the shim's whole request may hold) or 70 KiB not
@pytest.mark.parametrize("pad", ["", "#" * 47000, "\n" * 33000, "#" * (70 * 1024)],
                         ids=["short", "47000_hashes", "33000_newlines", "70KiB"])
def test_code_is_written_byte_for_byte(pad):
    """main.py is the code exactly (shell and printf specials, non-ASCII, no final newline),
    whether it goes with the run command or is written first; python runs it as main.py."""
    body = ("s = '%s %d \\\\n $HOME `id` $(id) \\'\\\" é 😀'\nprint(s)\n" + pad +
            "\nimport os, sys\nprint(len(open(__file__, 'rb').read()), __file__, sys.argv, os.getcwd(),"
            " os.environ.get('PWD'))")
    out = run_code(code=body, language="python")
    assert out["status"] == "Success", out
    lines = out["run_result"]["stdout"].split("\n")
    assert lines[0] == "%s %d \\n $HOME `id` $(id) '\" é 😀"
    assert lines[1] == f"{len(body.encode())} /workspace/main.py ['main.py'] /workspace /workspace"
    cpp = run_code(code='#include <cstdio>\nint main(){std::printf("%d%%\\n", 7);}', language="cpp")
    assert cpp["status"] == "Success" and cpp["run_result"]["stdout"] == "7%\n", cpp


def test_code_that_cannot_be_written_or_run_is_failed():
    """The code's file or the program not there as asked is the request's failure (Failed, its
    reason on stderr), not the platform's (SandboxError): main.py made a directory by `files`."""
    files = {"main.py/x": base64.b64encode(b"1").decode()}
    out = run_code(code="print(1)", language="python", files=files)
    assert out["status"] == "Failed", out
    rr = out["run_result"]
    assert rr["return_code"] == 126 and "main.py" in rr["stderr"] and rr["stdout"] == "", out


def test_each_request_gets_a_fresh_sandbox():
    a = run_code(code="open('/workspace/mark','w').write('x')", language="python")
    b = run_code(code="import os; print(os.path.exists('/workspace/mark'))", language="python")
    assert b["run_result"]["stdout"] == "False\n"
    assert a["executor_pod_name"] != b["executor_pod_name"]


def test_no_network():
    out = run_code(code="import socket\ns=socket.socket()\ns.settimeout(2)\n"
                        "try:\n  s.connect(('10.255.255.1', 80)); print('connected')\nexcept OSError as e:\n  print('blocked')",
                   language="python")
    assert out["run_result"]["stdout"] == "blocked\n"


@pytest.mark.parametrize("lang,code,expect", [
    ("nodejs", "console.log(6*7)", "42\n"),
    ("go", "package main\nimport \"fmt\"\nfunc main(){ fmt.Println(6*7) }", "42\n"),
    ("java", "public class Main { public static void main(String[] a){ System.out.println(6*7); } }", "42\n"),
    ("c", "#include <stdio.h>\nint main(){printf(\"%d\\n\", 6*7);}", "42\n"),
])
def test_other_languages(lang, code, expect):
    prog = {"nodejs": "node", "go": "go", "java": "javac", "c": "gcc"}[lang]
    if not shutil.which(prog):
        pytest.skip(f"SKIP (prerequisite missing): {prog} is not installed (tests/deps.sh)")
    out = run_code(code=code, language=lang, compile_timeout=120, memory_limit_MB=2048)
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == expect


def test_java_assertions_are_enabled():
    # SandboxFusion runs java with -ea: a failed assert is the program's failure (a test's
    # assert(...) that passed silently scored a wrong program as right)
    if not shutil.which("javac"):
        pytest.skip("SKIP (prerequisite missing): javac is not installed (tests/deps.sh)")
    code = "public class Main { public static void main(String[] a){ assert 1 == 2 : \"bad\"; } }"
    out = run_code(code=code, language="java", compile_timeout=120, memory_limit_MB=2048)
    assert out["status"] == "Failed", out
    rr = out["run_result"]
    assert rr["return_code"] == 1 and "java.lang.AssertionError: bad" in rr["stderr"], out


def test_java_class_path_has_the_jars_in_files(tmp_path):
    # SandboxFusion compiles and runs java with -cp ".:<every files entry named *.jar>": a
    # program using a library sent as a jar builds and runs
    if not shutil.which("javac"):
        pytest.skip("SKIP (prerequisite missing): javac is not installed (tests/deps.sh)")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "Helper.java").write_text("package lib; public class Helper { "
                                                  "public static int answer() { return 42; } }")
    subprocess.run(["javac", "lib/Helper.java"], cwd=tmp_path, check=True)
    jar = io.BytesIO()
    with zipfile.ZipFile(jar, "w") as z:
        z.write(tmp_path / "lib" / "Helper.class", "lib/Helper.class")
    files = {"deps/helper.jar": base64.b64encode(jar.getvalue()).decode(), "notes.txt": ""}
    code = "public class Main { public static void main(String[] a){ System.out.println(lib.Helper.answer()); } }"
    out = run_code(code=code, language="java", files=files, compile_timeout=120, memory_limit_MB=2048)
    assert out["status"] == "Success", out
    assert out["run_result"]["stdout"] == "42\n", out


def test_pytest_language():
    out = run_code(code="def test_ok():\n    assert 1 + 1 == 2\n\ndef test_bad():\n    assert 1 == 2\n",
                   language="pytest")
    assert out["status"] == "Failed"
    assert "1 failed, 1 passed" in out["run_result"]["stdout"]


def test_rust_runs_or_is_refused_by_name():
    # the host image has what the host's /usr has: rustc in /usr/bin or /usr/local/bin, or not
    have = any(os.access(os.path.join(d, "rustc"), os.X_OK) for d in ("/usr/local/bin", "/usr/bin", "/bin"))
    out = run_code(code='fn main(){ println!("{}", 6*7); }', language="rust", compile_timeout=120)
    if have:
        assert out["status"] == "Success" and out["run_result"]["stdout"] == "42\n", out
    else:
        assert out["status"] == "SandboxError" and "rustc" in out["message"], out
        assert out["run_result"] is None


def test_unknown_and_unsupported_languages():
    r = requests.post(f"{URL}/run_code", json={"code": "x", "language": "cobol"}, timeout=30)
    assert r.status_code == 422 and "language" in r.json()["message"]
    out = run_code(code="<?php echo 1;", language="php")
    assert out["status"] == "SandboxError" and "php" in out["message"]


@pytest.mark.parametrize("body,ctype", [
    ("{not json", "application/json"),
    ("[1,2]", "application/json"),
    ('{"language":"python"}', "application/json"),
    ('{"code":"print(1)"}', "application/json"),
    ('{"code":1,"language":"python"}', "application/json"),
    ('{"code":"x","language":"python","run_timeout":"soon"}', "application/json"),
    ('{"code":"x","language":"python","files":{"a":5}}', "application/json"),
    ('{"code":"x","language":"python","fetch_files":"a"}', "application/json"),
    ('{"code":"x","language":"python","memory_limit_MB":"lots"}', "application/json"),
    ("", "application/json"),
])
def test_malformed_bodies_are_clear_4xx(body, ctype):
    r = requests.post(f"{URL}/run_code", data=body, headers={"Content-Type": ctype}, timeout=30)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    j = r.json()
    assert j["message"] and j["code"]


@pytest.mark.parametrize("body,message", [
    # checked before a sandbox is made for the request (it was a SandboxError after one was)
    ({"files": {"a.txt": "!!!not base64"}}, "files: a.txt is not valid base64"),
    ({"files": {"ok.txt": "aGk=", "b.txt": "aGk"}}, "files: b.txt is not valid base64"),
    # a sandbox's memory is 16 MB to the host's (it was a SandboxError, and 2**44 wrapped to 0)
    ({"memory_limit_MB": 8}, "memory_limit_MB: must be 16.."),
    ({"memory_limit_MB": 2 ** 44}, "memory_limit_MB: must be 16.."),
    ({"run_timeout": 4 * 86400}, "run_timeout: must be a number of seconds in 0..259200"),
])
def test_bad_fields_are_422_naming_them(body, message):
    r = requests.post(f"{URL}/run_code", json={"code": "print(1)", "language": "python", **body},
                      timeout=30)
    assert r.status_code == 422 and r.json()["message"].startswith(message), r.text


def test_numbers_as_sandboxfusion_takes_them():
    # SandboxFusion's pydantic (v2, lax mode) takes for an int field a float with no fractional
    # part, a string of an int ("1024", " 1_024.00 "), true/false; for a float field a string of
    # a number ("5", "1e1"), true/false (each was a 422 here). The value is the one used.
    out = run_code(code="print(1)", language="python", memory_limit_MB=1024.0, run_timeout="5",
                   compile_timeout=" 1e1 ")
    assert out["status"] == "Success", out
    out = run_code(code="import time; time.sleep(5)", language="python", run_timeout="0.5")
    assert out["run_result"]["status"] == "TimeLimitExceeded", out
    out = run_code(code="x = bytearray(400 << 20)\nprint(len(x))", language="python",
                   memory_limit_MB=" 1_28.00 ")
    assert out["status"] == "Failed" and out["run_result"]["return_code"] != 0, out
    out = run_code(code="sleep 3; echo done", language="bash", memory_limit_MB=False,
                   run_timeout=True)  # 1 s, the default memory
    assert out["run_result"]["status"] == "TimeLimitExceeded", out
    # blanks around a number are str::trim's, Unicode's too (U+3000, U+00A0, U+2003, U+0085),
    # and a float's string has any length (each was a 422 here: ASCII blanks only, a float in
    # 63 characters at most)
    out = run_code(code="import time; time.sleep(5)", language="python",
                   run_timeout="\u3000" + "0" * 70 + ".5\u00a0",
                   compile_timeout="1" + "0" * 70 + "e-70", memory_limit_MB="\u2003 256\u0085")
    assert out["run_result"]["status"] == "TimeLimitExceeded", out


@pytest.mark.parametrize("body,message", [
    # what SandboxFusion's pydantic refuses is still a 422
    ({"memory_limit_MB": 1024.5}, "memory_limit_MB: must be an integer"),
    ({"memory_limit_MB": "1e3"}, "memory_limit_MB: must be an integer"),
    ({"memory_limit_MB": "1024."}, "memory_limit_MB: must be an integer"),
    ({"memory_limit_MB": "0x10"}, "memory_limit_MB: must be an integer"),
    ({"memory_limit_MB": "1__0"}, "memory_limit_MB: must be an integer"),
    ({"memory_limit_MB": None}, "memory_limit_MB: must be an integer"),
    ({"memory_limit_MB": [1]}, "memory_limit_MB: must be an integer"),
    ({"run_timeout": "abc"}, "run_timeout: must be a number of seconds"),
    ({"run_timeout": ""}, "run_timeout: must be a number of seconds"),
    ({"run_timeout": "0x10"}, "run_timeout: must be a number of seconds"),
    ({"run_timeout": "_1"}, "run_timeout: must be a number of seconds"),
    ({"run_timeout": "5e"}, "run_timeout: must be a number of seconds"),
    # pydantic-core trims as Rust does (not U+001C..U+001F, which Python's str.strip takes), and
    # a float's underscores only where there are no blanks around it (it tries the untrimmed
    # text without them); " 1_0" was taken here
    ({"run_timeout": "\x1c5"}, "run_timeout: must be a number of seconds"),
    ({"memory_limit_MB": "256\x1f"}, "memory_limit_MB: must be an integer"),
    ({"run_timeout": " 1_0"}, "run_timeout: must be a number of seconds"),
    ({"run_timeout": "1_0\u3000"}, "run_timeout: must be a number of seconds"),
    ({"compile_timeout": None}, "compile_timeout: must be a number of seconds"),
    # taken as a number, then out of this daemon's range as before
    ({"run_timeout": "inf"}, "run_timeout: must be a number of seconds in 0..259200"),
    ({"memory_limit_MB": True}, "memory_limit_MB: must be 16.."),
    ({"run_timeout": "-1"}, "run_timeout: must be a number of seconds in 0..259200"),
])
def test_numbers_sandboxfusion_refuses_are_422(body, message):
    r = requests.post(f"{URL}/run_code", json={"code": "print(1)", "language": "python", **body},
                      timeout=30)
    assert r.status_code == 422 and r.json()["message"].startswith(message), r.text


def test_content_encoding_is_415():
    # no endpoint decodes a Content-Encoding: refused by name, not parsed as it came
    r = requests.post(f"{URL}/run_code", data=b"\x1f\x8b not json",
                      headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
                      timeout=30)
    assert r.status_code == 415 and r.json()["message"].startswith("Content-Encoding gzip"), r.text


def test_zero_timeout_is_out_of_time_at_once():
    # as SandboxFusion's asyncio.wait_for(..., timeout=0) (it ran without a limit until the
    # sandbox's own end, a SandboxError after 130 s)
    out = run_code(code="while True: pass", language="python", run_timeout=0)
    assert out["status"] == "Failed", out
    assert out["run_result"]["status"] == "TimeLimitExceeded", out


def test_wrong_method_and_other_paths():
    assert requests.get(f"{URL}/run_code", timeout=10).status_code == 405
    # this listener has no token: it serves nothing but the SandboxFusion endpoints
    assert requests.get(f"{URL}/v1/sandboxes", timeout=10).status_code == 404
    assert requests.post(f"{URL}/v1/sandboxes", json={}, timeout=10).status_code == 404


def test_100_concurrent_mixed():
    cases = []
    for i in range(100):
        k = i % 5
        if k == 0:
            cases.append(({"code": f"print({i})", "language": "python"}, "Success", f"{i}\n"))
        elif k == 1:
            cases.append(({"code": f"echo {i}; exit 1", "language": "bash"}, "Failed", f"{i}\n"))
        elif k == 2:
            cases.append(({"code": "import time; time.sleep(20)", "language": "python", "run_timeout": 0.5},
                          "Failed", ""))
        elif k == 3:
            cases.append(({"code": "raise SystemExit(2)", "language": "python"}, "Failed", ""))
        else:
            cases.append(({"code": f"read x; echo $((x + {i}))", "language": "bash", "stdin": "1\n"},
                          "Success", f"{i + 1}\n"))

    def one(case):
        body, status, stdout = case
        out = run_code(**body)
        return out, status, stdout

    with concurrent.futures.ThreadPoolExecutor(100) as ex:
        results = list(ex.map(one, cases))
    for out, status, stdout in results:
        assert out["status"] == status, out
        assert out["run_result"]["stdout"] == stdout
    tle = [o for o, _, _ in results if o["run_result"]["status"] == "TimeLimitExceeded"]
    assert len(tle) == 20


def test_200_concurrent_are_queued_not_refused():
    def one(i):
        return requests.post(f"{URL}/run_code", json={"code": f"echo {i}", "language": "bash"}, timeout=600)

    with concurrent.futures.ThreadPoolExecutor(200) as ex:
        rs = list(ex.map(one, range(200)))
    assert [r.status_code for r in rs] == [200] * 200
    assert [r.json()["run_result"]["stdout"] for r in rs] == [f"{i}\n" for i in range(200)]


def test_jupyter():
    try:
        import jupyter_client  # noqa: F401
        import ipykernel  # noqa: F401
    except ImportError:
        pytest.skip("SKIP (prerequisite missing): python3-jupyter-client / python3-ipykernel")
    body = {"cells": ["a = 6 * 7", "a", "print(a)", "import sys; sys.stderr.write('err\\n')",
                      "raise RuntimeError('cell error')"], "total_timeout": 60}
    r = requests.post(f"{URL}/run_jupyter", json=body, timeout=120)
    assert r.status_code == 200
    out = r.json()
    assert out["status"] == "Success", out
    cells = out["cells"]
    assert len(cells) == 5
    assert cells[1]["display"][0]["text/plain"] == "42"
    assert cells[2]["stdout"] == "42\n"
    assert cells[3]["stderr"] == "err\n"
    assert cells[4]["error"][0]["ename"] == "RuntimeError"
    assert out["driver"]["status"] == "Finished"


def test_jupyter_timeout_is_failed():
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        pytest.skip("SKIP (prerequisite missing): python3-jupyter-client")
    body = {"cells": ["import time; time.sleep(30)"], "cell_timeout": 1, "total_timeout": 20}
    out = requests.post(f"{URL}/run_jupyter", json=body, timeout=120).json()
    assert out["status"] == "Failed"


def test_jupyter_driver_ends_without_traceback():
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        pytest.skip("SKIP (prerequisite missing): python3-jupyter-client")
    # the driver ends the client's channels, the kernel and the client's context itself (left to
    # the interpreter's teardown, their __del__ wrote "'NoneType' object is not callable"
    # tracebacks); driver is SandboxFusion's CommandRunResult, as for a run_result
    out = requests.post(f"{URL}/run_jupyter", json={"cells": ["print(1)"]}, timeout=120).json()
    assert out["status"] == "Success" and out["cells"][0]["stdout"] == "1\n", out
    drv = out["driver"]
    assert set(drv) == {"status", "execution_time", "return_code", "stdout", "stderr"}, drv
    assert drv["status"] == "Finished" and drv["return_code"] == 0, drv
    assert isinstance(drv["execution_time"], float) and drv["execution_time"] > 0, drv
    assert "Traceback" not in drv["stderr"], drv["stderr"]
    # nor anything else: the kernel's debugger checks no frozen modules (its four-line "Debugger
    # warning" was in every answer's driver.stderr, twice)
    assert drv["stderr"] == "", drv["stderr"]
    # a cell past its timeout: the kernel is still busy when the driver ends it
    body = {"cells": ["import time; time.sleep(30)"], "cell_timeout": 1, "total_timeout": 20}
    out = requests.post(f"{URL}/run_jupyter", json=body, timeout=120).json()
    assert out["status"] == "Failed" and out["driver"]["return_code"] == 0, out
    assert "Traceback" not in out["driver"]["stderr"], out["driver"]["stderr"]


def test_jupyter_kernel_that_cannot_start_leaves_one_traceback():
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        pytest.skip("SKIP (prerequisite missing): python3-jupyter-client")
    # the kernel runs `python3 -m ipykernel_launcher` in /workspace: a file of that name there is
    # what it runs, and it exits at once; the driver's answer is the real error, then nothing
    # (its cleanup stops only what started: before, the client left to the interpreter's
    # teardown added "Exception ignored in ... __del__" tracebacks after it)
    launcher = base64.b64encode(b"raise SystemExit('no kernel here')\n").decode()
    body = {"cells": ["print(1)"], "files": {"ipykernel_launcher.py": launcher}}
    out = requests.post(f"{URL}/run_jupyter", json=body, timeout=120).json()
    assert out["status"] == "SandboxError" and out["cells"] == [], out
    err = out["driver"]["stderr"]
    assert out["driver"]["return_code"] == 1, out["driver"]
    assert "no kernel here" in err, err
    assert err.rstrip().endswith("RuntimeError: Kernel died before replying to kernel_info"), err
    assert err.count("Traceback") == 1 and "Exception ignored" not in err, err
    assert out["message"].startswith("the Jupyter driver failed: "), out["message"]


def test_jupyter_numbers_as_sandboxfusion_takes_them():
    try:
        import jupyter_client  # noqa: F401
    except ImportError:
        pytest.skip("SKIP (prerequisite missing): python3-jupyter-client")
    # the driver gets the body: it sees the numbers (strings were a 422 here)
    body = {"cells": ["print(6 * 7)"], "cell_timeout": "0", "total_timeout": " 60.0 ",
            "memory_limit_MB": 1024.0}
    r = requests.post(f"{URL}/run_jupyter", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "Success", out
    assert out["cells"][0]["stdout"] == "42\n", out
    body = {"cells": ["import time; time.sleep(30)"], "cell_timeout": "1", "total_timeout": "20"}
    r = requests.post(f"{URL}/run_jupyter", json=body, timeout=120)
    assert r.status_code == 200 and r.json()["status"] == "Failed", r.text


def test_jupyter_files_null_is_422():
    # RunJupyterRequest's files is Dict[str, str] (RunCodeRequest's: Dict[str, Optional[str]]):
    # SandboxFusion's pydantic refuses a null there, even under a skipped name (was skipped here)
    for name in ("x", "a/IGNORE_THIS_FILE"):
        r = requests.post(f"{URL}/run_jupyter", json={"cells": ["1"], "files": {name: None}}, timeout=30)
        assert r.status_code == 422 and r.json()["message"].startswith("files:"), (name, r.status_code, r.text)
    out = run_code(code="print(1)", language="python", files={"x": None})
    assert out["status"] == "Success", out
