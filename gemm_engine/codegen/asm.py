"""Inline ``asm`` statements laid out for reading: on one line where they fit, else the PTX one
instruction a line as adjacent string literals (which C joins, so the PTX text is the same) with the
operand lists wrapped under it. `ptx` builds every intrinsic's statement here."""
from __future__ import annotations


#: Characters per line of an ``asm`` statement's PTX text and operand lists (the kernel's lines stay
#: under 120 where the statement is laid out over several).
_ASM_WIDTH = 96


def asm_statement(ptx: str, outs=(), ins=(), memory: bool = False, volatile: bool = True) -> str:
    """The ``asm`` statement of ``ptx`` (its text as PTX reads it: real newlines) with output and
    input operands and, with ``memory``, the memory clobber. On one line where it fits; else the PTX
    one instruction a line (as adjacent string literals, which C joins: the PTX is the same) and
    the operands wrapped under it."""
    head = "asm volatile(" if volatile else "asm("
    sections = [", ".join(outs), ", ".join(ins), '"memory"' if memory else ""]
    while sections and not sections[-1]:
        sections.pop()
    tail = ""
    for i, items in enumerate(sections):
        tail += (":" if tail.endswith(":") or (i and not tail) else " :") + (f" {items}" if items else "")
    line = f"    {head}{_literal(ptx)}{tail});"
    if len(line) <= _ASM_WIDTH + 24 and "\n" not in ptx.rstrip("\n"):
        return line
    lines = [f"    {head}"] + [f"        {_literal(piece)}" for piece in _pieces(ptx)]
    colons = ""
    for i, items in enumerate(sections):
        colons += ":"
        if not items and i < len(sections) - 1:
            continue
        if i == 2 and len(lines[-1]) + len(items) + 3 <= _ASM_WIDTH + 8 and colons == ":":
            lines[-1] += f" : {items}"      # the clobber beside the inputs where it fits
        else:
            lines += _wrapped([*outs] if i == 0 else [*ins] if i == 1 else [items], f"        {colons} ")
        colons = ""
    return "\n".join(lines) + ");"


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _pieces(ptx: str) -> list[str]:
    """``ptx`` cut after each newline, and long lines after a comma, in pieces of at most the width."""
    out = []
    for line in ptx.splitlines(keepends=True):
        if len(line) > _ASM_WIDTH and " " in line:           # the instruction apart from its operands
            cut = line.index(" ") + 1
            out.append(line[:cut])
            line = line[cut:]
        while len(line) > _ASM_WIDTH and ", " in line[:_ASM_WIDTH]:
            cut = line.rindex(", ", 0, _ASM_WIDTH) + 2
            out.append(line[:cut])
            line = line[cut:]
        out.append(line)
    return out


def _wrapped(words: list[str], first: str) -> list[str]:
    """``words`` joined by commas in lines of at most the width, the first after ``first``."""
    lines, current = [], first
    for k, w in enumerate(words):
        piece = w + ("," if k < len(words) - 1 else "")
        if current.strip() and current != first and len(current) + len(piece) > _ASM_WIDTH + 8:
            lines.append(current.rstrip())
            current = " " * len(first)
        current += piece + " "
    return lines + [current.rstrip()]
