"""codegen/asm.py: asm_statement's layout -- one line where it fits, else adjacent literals that C
joins back into the same PTX text, with every operand and the clobber kept in their sections."""
from __future__ import annotations

import re

import pytest

from gemm_engine.codegen.asm import asm_statement


def _joined(statement: str) -> str:
    """The PTX text C sees: the adjacent string literals before the first operand section, joined
    and unescaped."""
    head = re.split(r"\n\s*:|\s:(?=[\s:\"])", statement.split("(", 1)[1], maxsplit=1)[0]
    return "".join(bytes(s, "ascii").decode("unicode_escape") for s in re.findall(r'"((?:[^"\\]|\\.)*)"', head))


def _sections(statement: str) -> list[str]:
    """The text of each ':'-separated section after the PTX (outputs, inputs, clobbers)."""
    body = statement.split("(", 1)[1].rsplit(");", 1)[0]
    parts, cur, in_str = [], "", False
    for i, ch in enumerate(body):
        if ch == '"' and body[i - 1] != "\\":
            in_str = not in_str
        if ch == ":" and not in_str:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return [" ".join(p.split()) for p in parts[1:]]


def test_short_statement_on_one_line():
    s = asm_statement("cvt.rn.f16.f32 %0, %1;", ['"=h"(r)'], ['"f"(x)'], volatile=False)
    assert s == '    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));'


def test_volatile_and_memory_clobber():
    s = asm_statement("fence.proxy.async;", memory=True)
    assert s == '    asm volatile("fence.proxy.async;" ::: "memory");'


def test_inputs_only_keep_an_empty_output_section():
    s = asm_statement("st.shared.u32 [%0], %1;", ins=['"r"(a)', '"r"(v)'])
    assert s == '    asm volatile("st.shared.u32 [%0], %1;" :: "r"(a), "r"(v));'


def test_no_operands_has_no_colons():
    assert asm_statement("bar.sync 0;") == '    asm volatile("bar.sync 0;");'


@pytest.mark.parametrize("memory", [False, True])
def test_long_statement_splits_but_keeps_the_ptx_and_operands(memory):
    regs = ", ".join(f"%{i}" for i in range(40))
    ptx = f"{{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\nwgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16 {{{regs}}}, %40, %41, p;\n}}\n"
    outs = [f'"+f"(acc[{i}])' for i in range(40)]
    ins = ['"l"(da)', '"l"(db)', '"r"(1)']
    s = asm_statement(ptx, outs, ins, memory=memory)
    assert "\n" in s
    assert _joined(s) == ptx
    out_sec, in_sec, *rest = _sections(s)
    assert out_sec == ", ".join(outs) and in_sec == ", ".join(ins)
    assert rest == (['"memory"'] if memory else [])
    assert max(len(line) for line in s.splitlines()) <= 120


def test_escapes_quotes_and_backslashes():
    s = asm_statement('mov.u32 %0, "x\\y";', ['"=r"(r)'])
    assert _joined(s) == 'mov.u32 %0, "x\\y";'
