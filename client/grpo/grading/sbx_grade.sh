# sbx_grade.sh: helpers for GRPO graders written in sh (docs/GRPO.md "Grader kinds"). POSIX sh.
# The runner writes this file next to the hidden tests (/grader/sbx_grade.sh) in every grading
# sandbox; a grader running there as the grader user (uid 1001) sources it: `. ./sbx_grade.sh`.
# The agent's code runs only through sbx-as-agent (as uid 1000, not below the grader, with its
# own timeout and output bound); expected outputs stay in files only the grader can read, and
# the comparison happens here. Exit statuses a grader should use: 0 pass, 1 fail, 125 when the
# platform failed (sbx_platform_failure): the runner counts 125 as an infrastructure failure.
#
#   . ./sbx_grade.sh
#   sbx_compare_program cases -- python3 main.py   # cases/NAME.in -> cases/NAME.out
#   sbx_verdict $?                                 # exit 0, 1 or 125
#
# Functions return 0 (as expected), 1 (not: the agent's fault) or 125 (the platform's).

SBX_GRADE_TIMEOUT=${SBX_GRADE_TIMEOUT:-10}
SBX_GRADE_MAX_OUTPUT=${SBX_GRADE_MAX_OUTPUT:-1048576}
SBX_GRADE_CWD=${SBX_GRADE_CWD:-/workspace}
SBX_AS_AGENT=${SBX_AS_AGENT:-sbx-as-agent}

sbx_platform_failure() {
  echo "sbx_grade: platform failure: $*" >&2
  exit 125
}

# A private scratch directory in the grader's HOME (0700), never /tmp or /workspace. It lives
# on the sandbox's disk, which the agent's programs share: a full disk fails the case (1).
sbx_private_dir() {
  mktemp -d "${HOME:-/grader}/sbx-grade.XXXXXX"
}

# True when the sandbox's disk has (almost) no room left: the agent's programs filled it.
sbx_disk_full() {
  _free=$(df -Pk "${HOME:-/grader}" 2>/dev/null | awk 'NR == 2 { print $4 }')
  [ -n "$_free" ] && [ "$_free" -lt 256 ]
}

# sbx_run_agent STDIN_FILE OUT_FILE -- ARGV...: run ARGV as the agent in $SBX_GRADE_CWD with
# STDIN_FILE on its stdin and its stdout in OUT_FILE (its stderr discarded). Sets SBX_REASON,
# SBX_EXIT and SBX_TRUNCATED from sbx-as-agent's record. Returns 0 when the program exited 0 by
# itself within its bounds, 1 otherwise, 125 when sbx-as-agent itself failed.
sbx_run_agent() {
  _in=$1 _out=$2
  shift 2
  [ "$1" = "--" ] && shift
  _rd=$(sbx_private_dir) || return 1
  _res=$_rd/result.json
  "$SBX_AS_AGENT" --timeout "$SBX_GRADE_TIMEOUT" --max-output "$SBX_GRADE_MAX_OUTPUT" \
    --cwd "$SBX_GRADE_CWD" --stdin "$_in" --result "$_res" -- "$@" >"$_out" 2>/dev/null </dev/null
  _rc=$?
  SBX_REASON=$(sed -n 's/.*"reason" *: *"\([a-z_]*\)".*/\1/p' "$_res" 2>/dev/null)
  SBX_EXIT=$(sed -n 's/.*"exit_code" *: *\(-\{0,1\}[0-9]*\).*/\1/p' "$_res" 2>/dev/null)
  SBX_TRUNCATED=$(sed -n 's/.*"truncated" *: *\(true\|false\).*/\1/p' "$_res" 2>/dev/null)
  rm -rf "$_rd"
  if [ -z "$SBX_REASON" ]; then
    sbx_disk_full && return 1
    echo "sbx_grade: sbx-as-agent failed (exit $_rc)" >&2
    return 125
  fi
  [ "$SBX_REASON" = exited ] && [ "$SBX_EXIT" = 0 ] && [ "$SBX_TRUNCATED" != true ]
}

# sbx_same_output GOT WANT: equal as text, ignoring trailing whitespace of lines and trailing
# blank lines (SBX_GRADE_EXACT=1: byte for byte). Output with a NUL byte never matches as text.
sbx_same_output() {
  if [ "${SBX_GRADE_EXACT:-0}" = 1 ]; then
    cmp -s "$1" "$2"
    return
  fi
  tr -d '\000' <"$1" | cmp -s - "$1" || return 1
  _d=$(sbx_private_dir) || return 1
  sbx_norm_text <"$1" >"$_d/got"
  sbx_norm_text <"$2" >"$_d/want"
  cmp -s "$_d/got" "$_d/want"
  _rc=$?
  rm -rf "$_d"
  return $_rc
}

sbx_norm_text() {
  awk '{ sub(/[ \t\r]+$/, ""); line[NR] = $0 }
       END { n = NR; while (n > 0 && line[n] == "") n--; for (i = 1; i <= n; i++) print line[i] }'
}

# sbx_compare_program CASES_DIR -- ARGV...: the agent's program on hidden inputs against hidden
# outputs: for each CASES_DIR/NAME.in, ARGV with it on stdin must exit 0 and print
# CASES_DIR/NAME.out. 0: every case right; 1: a case wrong or the program failed; 125: platform.
sbx_compare_program() {
  _cases=$1
  shift
  [ "$1" = "--" ] && shift
  _any=0
  for _case in "$_cases"/*.in; do
    [ -f "$_case" ] || continue
    _any=1
    _got=$(sbx_private_dir) || return 1
    sbx_run_agent "$_case" "$_got/out" -- "$@"
    _rc=$?
    if [ $_rc -eq 0 ]; then
      sbx_same_output "$_got/out" "${_case%.in}.out"
      _rc=$?
    fi
    rm -rf "$_got"
    [ $_rc -eq 0 ] || return $_rc
  done
  [ $_any = 1 ] || sbx_platform_failure "no cases in $_cases"
}

# sbx_file_matches PATH WANT_FILE: a data-only check (no agent code runs): PATH is a regular
# file, not a symbolic link, with the same bytes as WANT_FILE.
sbx_file_matches() {
  [ -f "$1" ] && [ ! -L "$1" ] && cmp -s "$1" "$2"
}

# sbx_verdict STATUS: exit 0 for 0, 125 for 125, else 1.
sbx_verdict() {
  case "$1" in
  0) exit 0 ;;
  125) exit 125 ;;
  *) exit 1 ;;
  esac
}
