"""The code emitter (codegen/emitter.py): `roll` makes loops only of statements that differ in affine
literals and the loops compute what the statements did; `emit` changes whitespace only."""
from __future__ import annotations

import random
import re

import pytest

import gemm_engine
from gemm_engine.codegen import ptx
from gemm_engine.codegen.emitter import WIDTH, emit, has_loop, roll, tokens


def _code_tokens(text: str) -> list[str]:
    """The tokens of ``text`` without whitespace, adjacent string literals joined (as C joins them)."""
    out: list[str] = []
    text = re.sub(r"/\*.*?\*/", lambda m: " ".join(m.group().split()), text, flags=re.S)
    for t in tokens(text):
        if t.isspace():
            continue
        if t.startswith(("#", "/*")):
            t = " ".join(t.split())
        if t.startswith('"') and out and out[-1].startswith('"'):
            out[-1] = out[-1][:-1] + t[1:]
            continue
        out.append(t)
    return out


# -- roll ------------------------------------------------------------------------------------------
def test_roll_makes_a_loop_of_affine_statements():
    code = roll([f"out[{8 * k} + x] = acc[{2 * k + 1}];" for k in range(4)])
    assert code == "#pragma unroll\nfor (int i = 0; i < 4; ++i) {\nout[8 * i + x] = acc[2 * i + 1];\n}"
    assert has_loop(code)


def test_roll_nests_where_the_group_repeats_inside():
    code = roll([f"out[({r}) * ld + {c}] = acc[{r * 4 + c}];" for r in range(3) for c in range(4)])
    assert code == ("#pragma unroll\nfor (int i = 0; i < 3; ++i) {\n#pragma unroll\nfor (int j = 0; j < 4; ++j) {\n"
                    "out[(i) * ld + j] = acc[4 * i + j];\n}\n}")


def test_roll_groups_statements_that_repeat_together():
    stmts = [s for k in range(8) for s in (f"a[{k}] = {2 * k};", f"b[{k} + 8] = {2 * k + 1};")]
    code = roll(stmts)
    assert code.startswith("#pragma unroll\nfor (int i = 0; i < 8; ++i) {\na[i] = 2 * i;\nb[i + 8] = 2 * i + 1;")


@pytest.mark.parametrize("stmts", [
    ["a[0] = x;", "a[1] = y;"],                       # a name differs
    ["a[0u] = x;", "a[1u] = x;"],                     # a suffixed literal: its type would change
    ["a[1] = x;", "a[2] = x;", "a[4] = x;"],          # not affine
    ["a[0] = x;"],                                    # nothing repeats
    ["#pragma unroll 2\nfor (;;) a[0];", "#pragma unroll 4\nfor (;;) a[0];"],   # directives never vary
])
def test_roll_leaves_other_statements_as_they_are(stmts):
    assert roll(stmts) == "\n".join(stmts)
    assert not has_loop(roll(stmts))


def test_roll_names_its_variable_apart_from_the_body():
    code = roll([f"i[{k}] = j + {k};" for k in range(2)])
    assert code.startswith("#pragma unroll\nfor (int q = 0; q < 2; ++q) {\ni[q] = j + q;")


def test_roll_parenthesizes_where_precedence_would_change_the_value():
    code = roll([f"a[x - {k + 1}] = y / {k + 2} * (z << {2 * k});" for k in range(3)])
    assert "a[x - (i + 1)] = y / (i + 2) * (z << 2 * i);" in code


_OPS = ("+", "-", "*", "<<")


def _expression(rng, depth, holes):
    """A random integer expression (Python and C agree on it) with literal holes, as a format list."""
    if depth == 0 or rng.random() < 0.3:
        if rng.random() < 0.5:
            holes.append((rng.randrange(0, 20), rng.choice((0, 0, 1, 2, 3))))   # base, step per repeat
            return ["{%d}" % (len(holes) - 1)]
        return [rng.choice(("x", "y", "(x + 1)"))]
    op = rng.choice(_OPS)
    left, right = _expression(rng, depth - 1, holes), _expression(rng, depth - 1, holes)
    if op == "<<":   # a shift count in range whatever the operands (Python's % is never negative)
        right = ["(", *right, ") % 4"] if rng.random() < 0.5 else ["2"]
    wrap = op == "<<" or rng.random() < 0.4
    return (["("] if wrap else []) + left + [f" {op} "] + right + ([")"] if wrap else [])


def _python(code: str) -> str:
    """The C that `roll` emits (statements ``o[E] = E;`` and its loops) as Python."""
    out, depth = [], 0
    for line in code.split("\n"):
        loop = re.match(r"for \(int (\w+) = 0; \1 < (\d+); \+\+\1\) \{", line)
        if line == "#pragma unroll":
            continue
        if loop:
            out.append("    " * depth + f"for {loop.group(1)} in range({loop.group(2)}):")
            depth += 1
        elif line == "}":
            depth -= 1
        else:
            out.append("    " * depth + line.rstrip(";").replace("<<", "<<"))
    return "\n".join(out)


@pytest.mark.parametrize("seed", range(60))
def test_rolled_loops_compute_what_the_statements_did(seed):
    rng = random.Random(seed)
    group = []
    holes: list = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        group.append(["o[("] + _expression(rng, 2, holes) + [") % 64] = "] + _expression(rng, 3, holes) + [";"])
    repeats = rng.choice((2, 3, 4, 8))
    stmts = ["".join(part.format(*[b + s * k for b, s in holes]) for part in g) for k in range(repeats) for g in group]
    rolled = roll(stmts)
    results = []
    for code in ("\n".join(stmts), rolled):
        env = {"o": [0] * 64, "x": 5, "y": -3}
        exec(_python(code), env)   # noqa: S102 -- generated arithmetic only
        results.append(env["o"])
    assert results[0] == results[1], rolled


# -- emit ------------------------------------------------------------------------------------------
def test_emit_indents_blocks_and_bodies_without_braces():
    src = "\n".join(["void f() {", "if (a) {", "x = 1;", "} else {", "#pragma unroll", "for (int i = 0; i < 4; ++i)",
                     "for (int j = 0; j < 4; ++j)", "y[i] += j;", "z = 2;", "}", "}"])
    assert emit(src).split("\n") == ["void f() {", "    if (a) {", "        x = 1;", "    } else {",
                                     "        #pragma unroll", "        for (int i = 0; i < 4; ++i)",
                                     "            for (int j = 0; j < 4; ++j)", "                y[i] += j;",
                                     "        z = 2;", "    }", "}"]


def test_emit_keeps_a_continued_statement_under_its_first_line():
    src = "f(\na,\n  b);\nasm volatile(\"x\"\n: \"=r\"(y));\ng();"
    assert emit(src).split("\n") == ["f(", "    a,", "      b);", 'asm volatile("x"', '        : "=r"(y));', "g();"]


def test_emit_breaks_long_lines_at_the_outermost_level_and_keeps_tokens():
    args = ", ".join(f"argument_{k} + offset_{k} * stride" for k in range(8))
    src = f"{{\nresult = function_with_a_long_name({args});\n/* {' '.join(['word'] * 60)} */\n}}"
    out = emit(src)
    assert all(len(line) <= WIDTH for line in out.split("\n"))
    assert _code_tokens(out) == _code_tokens(src)
    assert all(line.rstrip().endswith(",") for line in out.split("\n")[1:3])   # broken after arguments


def test_emit_never_breaks_strings_or_directives():
    long = '"' + "x" * 150 + '"'
    src = f"f({long}, a);\n#define M(a) {'a + ' * 40}a"
    out = emit(src)
    assert long in out and f"#define M(a) {'a + ' * 40}a" in out


# -- the kernels -----------------------------------------------------------------------------------
_KERNELS = [("specialized_wgmma", "bfloat16", "cuda", "sm_90", 4096), ("specialized_wgmma", "float8_e4m3fn", "cuda", "sm_90", 4096),
            ("pipelined_wgmma", "bfloat16", "cuda", "sm_90", 4096), ("pipelined_mma", "float16", "cuda", "sm_80", 4096),
            ("simple_unit", "float32", "opencl", "sm_90", 100), ("double_buffering_unit", "float32", "cuda", "sm_80", 256),
            ("split_k", "float32", "cuda", "sm_90", 64)]


@pytest.mark.parametrize("algorithm,dtype,backend,arch,size", _KERNELS)
def test_kernels_have_no_line_over_the_width(algorithm, dtype, backend, arch, size):
    k = 65536 if algorithm == "split_k" else size
    text = gemm_engine.source(algorithm, m=size, n=size, k=k, dtype=dtype, backend=backend, arch=arch)
    long = [line for line in text.split("\n") if len(line) > WIDTH]
    assert not long, long[:3]
    assert emit(text) == text          # laid out once: emitting again changes nothing


def test_the_default_kernel_writes_its_tile_in_loops():
    text = gemm_engine.source("specialized_wgmma", m=4096, n=4096, k=4096, dtype="bfloat16")
    assert re.search(r"#pragma unroll\s+for \(int i = 0; i < 16; \+\+i\) \{", text)
    assert "acc_0[4 * i + 1]" in text and "acc_0[127]" not in text


def test_multiline_asm_keeps_the_ptx_text():
    name, definition = ptx.wgmma(256, 16, "bf16", (0, 1))
    joined = "".join(_code_tokens(definition))
    assert ('"{\\n.reg .pred p;\\nsetp.ne.b32 p, %130, 0;\\nwgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 '
            '{' + ", ".join(f"%{i}" for i in range(128)) + '}, %128, %129, p, 1, 1, 0, 1;\\n}\\n"') in joined
    assert max(len(line) for line in definition.split("\n")) <= WIDTH
