#!/usr/bin/python3
"""verl-style reward scoring for a grading sandbox (issue 25 item 3; rule in docs/GRPO.md).

python3 sbx_verl.py [--timeout S] ROW.json SOLUTION.txt [REWARD.py]
  ROW.json: {"data_source": ..., "reward_model": {"ground_truth": ...}, "extra_info": ...}
  SOLUTION.txt: the model's completion text (solution_str)
  REWARD.py: a user file with verl's compute_score(data_source, solution_str, ground_truth,
  extra_info=None), used unchanged (float, or a dict with "score"); without it the built-in
  scorer named by data_source is used.
Prints "score S" as its only stdout line (the scorer's own prints go to stderr) and exits
round(S * 10) clamped to 0..10: a task maps exit k to reward k/10, or reads S itself with
"reward": "score" (the runner does so for verl rows).
Failure rule: the scorer raising on the model's output, or running past --timeout seconds
(else $SBX_VERL_TIMEOUT, default 10), is a zero reward (exit 0; the score line says why, a
raised message on one line cut to REMARK_MAX characters); a missing/unloadable reward
file, no compute_score in it, an unknown data_source, a result that is not a number, or the
scoring child dying by a signal we did not send (e.g. OOM-killed) is a platform/configuration
failure (exit 125 with the reason on stderr: infrastructure, never the agent's)."""
import json
import multiprocessing
import os
import re
import sys

PLATFORM_EXIT = 125
REMARK_MAX = 80  # characters of a raised message kept, on one line, in the score line's remark
_GSM8K_ANSWER = re.compile(r"#### (-?[0-9.,]+)")
_GSM8K_TAIL = 300  # verl matches only the solution's last 300 characters


def gsm8k(data_source, solution_str, ground_truth, extra_info=None):
    """As verl scores openai/gsm8k by default (its strict method): in the solution's last 300
    characters, the number right after the last '#### ', commas dropped, equal as text to the
    ground truth; no '#### N' there scores 0."""
    found = _GSM8K_ANSWER.findall(solution_str[-_GSM8K_TAIL:])
    return 1.0 if found and found[-1].replace(",", "") == str(ground_truth) else 0.0


def _boxed(s):
    i = s.rfind("\\boxed{")
    if i < 0:
        return None
    depth, j = 0, i + len("\\boxed{") - 1
    for k in range(j, len(s)):
        depth += {"{": 1, "}": -1}.get(s[k], 0)
        if depth == 0:
            return s[j + 1:k]
    return None


def boxed_match(data_source, solution_str, ground_truth, extra_info=None):
    """The last \\boxed{...} equals the ground truth (whitespace removed)."""
    got = _boxed(solution_str)
    norm = lambda x: re.sub(r"\s+", "", str(x))
    return 1.0 if got is not None and norm(got) == norm(ground_truth) else 0.0


def exact_match(data_source, solution_str, ground_truth, extra_info=None):
    """The trimmed solution equals the trimmed ground truth."""
    return 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0


# data_source -> scorer: verl's names for these datasets (examples/data_preprocess), a short
# alias, exact_match. Never a name verl scores another way ("math" is DAPO's "Answer:" rule
# there, +1/-1). Kept equal to client/grpo/verlset.c's list (tests/unit/test_sbx_verl.sh).
BUILTINS = {"openai/gsm8k": gsm8k, "gsm8k": gsm8k, "lighteval/MATH": boxed_match,
            "DigitalLearningGmbH/MATH-lighteval": boxed_match, "exact_match": exact_match}


class ConfigError(Exception):
    pass


def load_scorer(data_source, reward_file):
    if reward_file is None:
        if data_source not in BUILTINS:
            raise ConfigError("no built-in scorer for data_source %r (built-ins: %s); give a "
                              "reward file" % (data_source, ", ".join(sorted(BUILTINS))))
        return BUILTINS[data_source]
    ns = {"__name__": "sbx_verl_reward", "__file__": reward_file}
    try:
        with open(reward_file) as f:
            code = compile(f.read(), reward_file, "exec")
        exec(code, ns)
    except Exception as e:  # the user's file, not the model's output
        raise ConfigError("cannot load %s: %s: %s" % (reward_file, type(e).__name__, e))
    if not callable(ns.get("compute_score")):
        raise ConfigError("%s defines no compute_score()" % reward_file)
    return ns["compute_score"]


def _child(fn, args, conn):
    os.dup2(2, 1)  # the scorer's prints go to stderr: stdout carries only the score line
    sys.stdout = sys.stderr
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as e:  # raised on the model's output: zero reward
        conn.send(("raised", "%s: %s" % (type(e).__name__, e)))


def score(row, solution, reward_file=None, timeout=10.0):
    """(exit code, message) by the rule in the module docstring."""
    ds = row.get("data_source")
    gt = (row.get("reward_model") or {}).get("ground_truth")
    try:
        fn = load_scorer(ds, reward_file)
    except ConfigError as e:
        return PLATFORM_EXIT, str(e)
    parent, child = multiprocessing.Pipe(duplex=False)
    p = multiprocessing.Process(target=_child, args=(fn, (ds, solution, gt, row.get("extra_info")),
                                                     child))
    p.start()
    child.close()
    got, ready = None, parent.poll(timeout)
    if ready:
        try:
            got = parent.recv()
        except EOFError:  # the child died without answering
            pass
    if not ready and p.is_alive():
        p.kill()
        p.join()
        return 0, "score 0 (reward function timed out after %gs)" % timeout
    p.join()
    if got is None:
        return PLATFORM_EXIT, "scoring process died (exit %s) before answering" % p.exitcode
    kind, val = got
    if kind == "raised":
        # one line, cut short: the score line must stay the last line and be read back whole
        return 0, "score 0 (reward function raised %s)" % " ".join(val.split())[:REMARK_MAX]
    if isinstance(val, dict):
        val = val.get("score")
    if isinstance(val, bool) or not isinstance(val, (int, float)) or val != val:
        return PLATFORM_EXIT, "reward function returned %r, not a number" % (val,)
    s = min(1.0, max(0.0, float(val)))
    return int(round(s * 10)), "score %r" % float(val)  # the shortest text that reads back


def main(argv):
    timeout = float(os.environ.get("SBX_VERL_TIMEOUT", "10"))
    if len(argv) > 2 and argv[1] == "--timeout":
        try:
            timeout = float(argv[2])
        except ValueError:
            timeout = -1
        argv = argv[:1] + argv[3:]
    if len(argv) not in (3, 4) or not timeout > 0:
        print(__doc__, file=sys.stderr)
        return PLATFORM_EXIT
    try:
        with open(argv[1]) as f:
            row = json.load(f)
        with open(argv[2], errors="replace") as f:
            solution = f.read()
    except (OSError, ValueError) as e:
        print("sbx_verl: %s" % e, file=sys.stderr)
        return PLATFORM_EXIT
    code, msg = score(row, solution, argv[3] if len(argv) == 4 else None, timeout)
    print(msg, file=sys.stderr if code == PLATFORM_EXIT else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
