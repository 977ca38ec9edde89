/* The grading helper library (client/grpo/grading/: sbx_grade.py, sbx_grade.sh, sbx_verl.py),
 * built into the runner so that every grading sandbox gets the copy this runner was built with:
 * the runner writes them next to the hidden tests (GRPO_GRADER_DIR). docs/GRPO.md "Grader kinds".
 */
#include "client/grpo/runner.h"

#include <string.h>

/* The files' bytes, included by the assembler (the Makefile names them as prerequisites). */
__asm__(".section .rodata\n"
        ".balign 16\n"
        "grpo_gradelib_py:\n"
        ".incbin \"client/grpo/grading/sbx_grade.py\"\n"
        "grpo_gradelib_py_end:\n"
        ".balign 16\n"
        "grpo_gradelib_sh:\n"
        ".incbin \"client/grpo/grading/sbx_grade.sh\"\n"
        "grpo_gradelib_sh_end:\n"
        ".balign 16\n"
        "grpo_gradelib_verl:\n"
        ".incbin \"client/grpo/grading/sbx_verl.py\"\n"
        "grpo_gradelib_verl_end:\n"
        ".previous\n");

extern const char grpo_gradelib_py[], grpo_gradelib_py_end[];
extern const char grpo_gradelib_sh[], grpo_gradelib_sh_end[];
extern const char grpo_gradelib_verl[], grpo_gradelib_verl_end[];

size_t grpo_gradelib_files(grpo_file *ret, size_t max) {
    const grpo_file files[] = {
        {(char *)GRPO_GRADER_DIR "/sbx_grade.py", (char *)grpo_gradelib_py,
         (size_t)(grpo_gradelib_py_end - grpo_gradelib_py)},
        {(char *)GRPO_GRADER_DIR "/sbx_grade.sh", (char *)grpo_gradelib_sh,
         (size_t)(grpo_gradelib_sh_end - grpo_gradelib_sh)},
        {(char *)GRPO_GRADER_DIR "/sbx_verl.py", (char *)grpo_gradelib_verl,
         (size_t)(grpo_gradelib_verl_end - grpo_gradelib_verl)},
    };
    size_t n = sizeof(files) / sizeof(files[0]);
    for (size_t i = 0; i < n && i < max; i++)
        ret[i] = files[i];
    return n;
}
