#!/usr/bin/python3
"""Scripted answers for tasks/python-funcs.jsonl (the e2e test's policy, served by
bench/grpo_fake_server.py --answers): `right` solves every task; `wrong` gives each task a
plausible bug (an off-by-one, a case not handled, one level of nesting only, no subtractive
numerals, an endless loop) or no function at all.
Usage: python_funcs_solutions.py right|wrong > answers.json  (prompt substring -> command)"""

import json
import sys

RIGHT = {
    "fizzbuzz(n)": '''
def fizzbuzz(n):
    out = []
    for i in range(1, n + 1):
        s = ("Fizz" if i % 3 == 0 else "") + ("Buzz" if i % 5 == 0 else "")
        out.append(s or str(i))
    return out
''',
    "is_palindrome(s)": '''
def is_palindrome(s):
    t = [c.lower() for c in s if c.isalnum()]
    return t == t[::-1]
''',
    "word_count(text)": '''
def word_count(text):
    d = {}
    for w in text.lower().split():
        d[w] = d.get(w, 0) + 1
    return d
''',
    "flatten(xs)": '''
def flatten(xs):
    out = []
    for x in xs:
        out.extend(flatten(x) if isinstance(x, list) else [x])
    return out
''',
    "to_roman(n)": '''
def to_roman(n):
    out = ""
    for v, s in ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                 (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")):
        while n >= v:
            out, n = out + s, n - v
    return out
''',
    "median(xs)": '''
def median(xs):
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
''',
}

WRONG = {
    "fizzbuzz(n)": RIGHT["fizzbuzz(n)"].replace("range(1, n + 1)", "range(1, n)"),
    "is_palindrome(s)": RIGHT["is_palindrome(s)"].replace("c.lower()", "c"),
    "word_count(text)": RIGHT["word_count(text)"].replace("text.lower()", "text"),
    "flatten(xs)": RIGHT["flatten(xs)"].replace("flatten(x) if", "x if"),
    "to_roman(n)": RIGHT["to_roman(n)"].replace('(900, "CM"), ', "").replace('(4, "IV"), ', ""),
    "median(xs)": "\ndef median(xs):\n    while True:\n        pass\n",
}


def command(code):
    return "cat > solution.py <<'EOF'" + code + "EOF"


def main():
    which = {"right": RIGHT, "wrong": WRONG}[sys.argv[1]]
    json.dump({k: command(v) for k, v in which.items()}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
