#!/usr/bin/python3
"""A task set a user would recognise: small Python coding tasks. The agent writes
/workspace/solution.py with the asked function; the hidden test calls it on hidden inputs and
compares the returned values with hidden expected values. Reward 1 when every case matches,
else 0 (a crash, a timeout, a missing function or a wrong value are the agent's failure).

The test is docs/GRPO.md's "function calls" grader kind: it runs as the grader user and hands
the inputs to sbx_grade.call_functions (the helper library the runner writes beside it), which
calls the agent's function in one `python3 -I` process of the agent user through sbx-as-agent
and compares the returned values in the grader, so the expected values never enter a process
the agent's code runs in.

python3 tasks/python_funcs.py > tasks/python-funcs.jsonl  writes the set (deterministic)."""

import json

LIMITS = {"cpu": 0.5, "memory": "256Mi", "disk": "16Mi", "pids": 32, "timeout": "5m",
          "idle_timeout": "2m"}

# id, function, what to implement, hidden cases [(args, expected)]
TASKS = [
    ("fizzbuzz", "fizzbuzz", "fizzbuzz(n) returning a list of strings for 1..n: \"Fizz\" for "
     "multiples of 3, \"Buzz\" for multiples of 5, \"FizzBuzz\" for both, else the number",
     [([1], ["1"]), ([5], ["1", "2", "Fizz", "4", "Buzz"]),
      ([15], ["1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz",
              "13", "14", "FizzBuzz"]), ([0], [])]),
    ("palindrome", "is_palindrome", "is_palindrome(s) returning True when s reads the same "
     "backwards, ignoring case and every character that is not a letter or a digit",
     [(["A man, a plan, a canal: Panama"], True), (["race a car"], False), ([""], True),
      (["No 'x' in Nixon"], True), (["ab"], False)]),
    ("word_count", "word_count", "word_count(text) returning a dict from each lower-cased "
     "whitespace-separated word to how often it occurs",
     [(["the cat the hat"], {"the": 2, "cat": 1, "hat": 1}), ([""], {}),
      (["A a  A\nb"], {"a": 3, "b": 1})]),
    ("flatten", "flatten", "flatten(xs) returning the elements of an arbitrarily nested list "
     "in order, as one flat list",
     [([[1, [2, [3, 4]], 5]], [1, 2, 3, 4, 5]), ([[]], []), ([[[[]], [1]]], [1]),
      ([["a", ["b"]]], ["a", "b"])]),
    ("roman", "to_roman", "to_roman(n) returning the Roman numeral of 1 <= n <= 3999 as a "
     "string (subtractive forms: IV, IX, XL, XC, CD, CM)",
     [([1], "I"), ([4], "IV"), ([9], "IX"), ([58], "LVIII"), ([1994], "MCMXCIV"),
      ([3999], "MMMCMXCIX")]),
    ("median", "median", "median(xs) returning the median of a non-empty list of numbers (the "
     "mean of the two middle values when the length is even)",
     [([[3, 1, 2]], 2), ([[4, 1, 3, 2]], 2.5), ([[7]], 7), ([[-1, -5, 10, 0]], -0.5)]),
]

GRADER = '''# Hidden test of task {id}: calls {fn}() from /workspace/solution.py on hidden inputs
# in a process of the agent user (sbx_grade.call_functions, through sbx-as-agent) and compares
# the returned values here; the expected values never leave this process.
# Exit 0: every case right; 1: not; 125: the platform could not run the agent's code.
import sbx_grade

CASES = {cases}
sbx_grade.main(lambda: sbx_grade.call_functions("solution", "{fn}", CASES, timeout=20))
'''


def main():
    print(json.dumps({"task_set": "python-funcs@1", "split": {"seed": 1, "held_out": 0}}))
    for tid, fn, what, cases in TASKS:
        print(json.dumps({
            "id": tid, "limits": LIMITS, "max_turns": 1, "max_completion_tokens": 512,
            "command_timeout": "10s",
            "prompt": f"Write /workspace/solution.py with a Python function {what}.",
            "grader": {"files": {"test.py": GRADER.format(id=tid, fn=fn, cases=repr(cases))},
                       "command": "python3 test.py", "timeout": "30s"}}))


if __name__ == "__main__":
    main()
