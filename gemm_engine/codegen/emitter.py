"""The code emitter: generated CUDA / OpenCL C laid out as a person would write it.

Templates produce statements one to a line, with braces but without indentation, and unroll what
the stage and the listeners must see element by element. Two passes make the kernel readable
without changing what it computes:

* `roll` turns a run of statements that differ only in integer literals, each an affine function of
  the statement's position (the stores of a tile's accumulators), into a ``#pragma unroll`` loop with
  a compile-time trip count: nvcc unrolls it back into the same statements, so every register index
  is again a constant and the SASS is the same. Statements that differ in anything else (a name, a
  suffixed literal, code a listener injected) stay as they are.
* `emit` indents every block (braces, and the bodies of ``if`` / ``for`` / ``else`` without braces)
  and breaks a line longer than the width at the top-most level of its expression that fits: after a
  comma, before a binary operator, after an assignment. Strings, comments and preprocessor lines are
  never broken inside (a comment alone on its line is wrapped between words).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

WIDTH = 120
INDENT = "    "

_TOKEN = re.compile(r"""
    (?P<space>[ \t]+)
  | (?P<newline>\n)
  | (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^!=<>]=|::|.)
""", re.X | re.S)

#: Binary operators' precedence (C's table: higher binds tighter).
_BINARY = {"*": 13, "/": 13, "%": 13, "+": 12, "-": 12, "<<": 11, ">>": 11, "<": 10, "<=": 10, ">": 10,
           ">=": 10, "==": 9, "!=": 9, "&": 8, "^": 7, "|": 6, "&&": 5, "||": 4}
#: Tokens after which an expression stands on its own (nothing binds to its left).
_OPENERS = {"(", "[", ",", "{", ";", "?", ":", "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=",
            ">>=", "return"}
#: Tokens before which an expression ends (nothing binds to its right).
_CLOSERS = {")", "]", ",", ";", "}", "?", ":"}
_PLAIN_INT = re.compile(r"(?:0|[1-9]\d*)\Z")


def tokens(text: str) -> list[str]:
    """``text`` cut into C tokens, whitespace and newlines kept (``"".join`` gives it back); a
    preprocessor line is one token."""
    out: list[str] = []
    for line in text.split("\n"):
        if out:
            out.append("\n")
        if line.lstrip().startswith("#"):
            out.append(line)
            continue
        out += [m.group() for m in _TOKEN.finditer(line)]
    return out


def _significant(token) -> bool:
    return not (isinstance(token, str) and (token.isspace() or token.startswith(("/*", "//", "#"))))


# -- rolling unrolled statements into loops ------------------------------------------------------
@dataclass(frozen=True)
class _Affine:
    """An integer ``const + sum(coef * var)``: a literal of an unrolled statement, in loop variables."""

    const: int
    coefs: tuple = ()   # ((var, coef), ...), outermost loop first

    def precedence(self) -> int:
        """16: an atom; 13: a product; 12: a sum (or a negated term)."""
        terms = len(self.coefs) + (1 if self.const or not self.coefs else 0)
        if terms > 1 or (self.coefs and self.coefs[0][1] < 0):
            return 12
        return 13 if self.coefs and self.coefs[0][1] != 1 else 16

    def text(self) -> str:
        parts = []
        for var, coef in self.coefs:
            term = var if abs(coef) == 1 else f"{abs(coef)} * {var}"
            parts.append(("-" if coef < 0 else "") + term if not parts else
                         (" - " if coef < 0 else " + ") + term)
        if self.const or not parts:
            parts.append(str(self.const) if not parts else
                         (" - " if self.const < 0 else " + ") + str(abs(self.const)))
        return "".join(parts)


def _lift(token):
    """A plain decimal int literal as an `_Affine` (it may vary between statements); else the token."""
    if isinstance(token, str) and _PLAIN_INT.match(token) and int(token) < 2 ** 31:
        return _Affine(int(token))
    return token


def _merge(chunks: list[list], var: str) -> list | None:
    """One template of ``chunks`` (token lists) whose differing tokens are affine in the chunk's
    index ``var``; None when they differ otherwise."""
    first = chunks[0]
    if any(len(c) != len(first) for c in chunks):
        return None
    out = []
    for column in zip(*chunks):
        t0 = column[0]
        if all(t == t0 for t in column):
            out.append(t0)
            continue
        if not all(isinstance(t, _Affine) and t.coefs == t0.coefs for t in column):
            return None
        step = column[1].const - t0.const
        if any(t.const != t0.const + step * c for c, t in enumerate(column)):
            return None
        out.append(_Affine(t0.const, t0.coefs + ((var, step),)))
    return out


def _render(template: list) -> str:
    """Template tokens as C: an affine term bare where C's precedence keeps it whole, else in parentheses."""
    sig = [i for i, t in enumerate(template) if _significant(t)]
    where = {i: n for n, i in enumerate(sig)}
    out = []
    for i, t in enumerate(template):
        if not isinstance(t, _Affine):
            out.append(t)
            continue
        n = where[i]
        left = template[sig[n - 1]] if n > 0 else ";"
        right = template[sig[n + 1]] if n + 1 < len(sig) else ";"
        out.append(t.text() if _bare(t, left, right, template[sig[n - 2]] if n > 1 else ";")
                   else f"({t.text()})")
    return "".join(out)


def _bare(t: _Affine, left, right, before_left) -> bool:
    p = t.precedence()
    if p == 16:
        return True
    if isinstance(left, _Affine) or isinstance(right, _Affine):
        return False
    operand_end = isinstance(before_left, _Affine) or (
        isinstance(before_left, str) and (before_left in (")", "]") or before_left[:1].isalnum()
                                          or before_left[:1] in "_\"'"))
    left_ok = left in _OPENERS or (left in _BINARY and operand_end and p > _BINARY[left])
    right_ok = right in _CLOSERS or (right in _BINARY and p >= _BINARY[right])
    return left_ok and right_ok


_LOOP_VARS = ("i", "j", "q", "u", "v", "w")


def roll(statements: Sequence[str], taken: frozenset = frozenset()) -> str:
    """``statements`` (C statements or blocks, in order) as one text: where they are ``n`` repeats
    of a group of ``p`` statements that differ only in plain int literals, each affine in the
    repeat's index, as ``#pragma unroll`` ``for`` loops (nested where the group repeats inside too);
    otherwise one after another, unchanged. The loop counts from 0 by 1 to a literal bound, so that
    after unrolling every index is the literal it replaced."""
    stmts = [s for s in statements if s.strip()]
    templates = [[_lift(t) for t in tokens(s)] for s in stmts]
    return _roll(templates, set(taken))


def _roll(templates: list[list], taken: set) -> str:
    n = len(templates)
    names = {t for tpl in templates for t in tpl if isinstance(t, str) and (t[:1].isalpha() or t[:1] == "_")}
    names |= taken
    var = next((v for v in _LOOP_VARS if v not in names), None)
    if var is not None:
        for p in range(1, n // 2 + 1):
            if n % p:
                continue
            chunks = [[t for k in range(c * p, c * p + p) for t in (["\n"] if k > c * p else []) + templates[k]]
                      for c in range(n // p)]
            merged = _merge(chunks, var)
            if merged is None:
                continue
            body = _split_statements(merged, p, [len(templates[k]) for k in range(p)])
            inner = _roll(body, taken | {var}) if p > 1 else _render(body[0])
            return f"#pragma unroll\nfor (int {var} = 0; {var} < {n // p}; ++{var}) {{\n{inner}\n}}"
    return "\n".join(_render(t) for t in templates)


def _split_statements(merged: list, p: int, lengths: list[int]) -> list[list]:
    out, at = [], 0
    for k in range(p):
        out.append(merged[at:at + lengths[k]])
        at += lengths[k] + 1   # the newline between statements
    return out


# -- layout ----------------------------------------------------------------------------------------
_HEADER = re.compile(r"(?:\}\s*)?(?:else\s+)?(?:if|for|while)\s*\(")
_BARE_HEADER = re.compile(r"(?:\}\s*)?(?:else|do)\Z")


def emit(source: str, width: int = WIDTH) -> str:
    """``source`` indented by block and by brace-less ``if`` / ``for`` / ``else`` bodies, its lines
    over ``width`` characters broken at safe points; the tokens themselves are unchanged."""
    out: list[str] = []
    blocks: list[int] = []     # the indent level of each open block's statements
    hang = 0                   # levels added by brace-less control headers above
    parens: list[list] = []    # per open ( or [ carried to the next line: [its lines' level, their own indent]
    in_comment = False
    for raw in source.split("\n"):
        line = raw.strip()
        if in_comment:
            out.append(raw.rstrip())
            in_comment = "*/" not in line
            continue
        if not line:
            out.append("")
            continue
        level = (blocks[-1] if blocks else 0) + hang
        if line.startswith("#"):
            out.append(INDENT * level + line if line.startswith("#pragma") else line)
            continue
        code = [t for t in tokens(line) if _significant(t)]
        if code and code[0] == "}" and blocks:
            level = blocks[-1] - 1
        lead = INDENT * level
        if parens:
            # a continuation line: under the statement, keeping the template's own alignment of its lines
            indent = len(raw) - len(raw.lstrip())
            if parens[-1][1] is None:
                parens[-1][1] = indent
            lead = INDENT * parens[-1][0] + " " * max(0, indent - parens[-1][1])
        text = lead + line
        out += _wrap(text, lead, width) if len(text) > width else [text]
        if line.startswith("/*") and "*/" not in line:
            in_comment = True
            continue
        # blocks and parentheses this line opens or closes
        for k, t in enumerate(code):
            if t == "{":
                blocks.append(level + 1)
                hang = 0
            elif t == "}" and blocks:
                blocks.pop()
            elif t in "([":
                parens.append([(parens[-1][0] if parens else level) + (1 if k == len(code) - 1 else 2), None])
            elif t in ")]" and parens:
                parens.pop()
        if parens:
            continue
        stripped = "".join(code)
        header = (_HEADER.match(line) and code and code[-1] == ")") or _BARE_HEADER.match(stripped)
        if header:
            hang += 1
        elif code and code[-1] in (";", "}"):
            hang = 0
    return "\n".join(out)


# -- breaking long lines -------------------------------------------------------------------------
_AFTER = {",", ";", "=", "+=", "-=", "*=", "/=", "|=", "&=", "^="}
_BEFORE = {"&&", "||", "?", ":", "::", "+", "-", "|", "^", "<<", ">>", "<", ">", "<=", ">=", "==", "!="}
_BREAK_RANK = {",": 0, ";": 0, "&&": 1, "||": 1, "?": 1, ":": 1, "::": 1}


def _wrap(text: str, indent: str, width: int) -> list[str]:
    if text.lstrip().startswith(("/*", "//")) and text.rstrip().endswith("*/") and text.count("/*") == 1:
        return _wrap_comment(text, indent, width)
    toks = tokens(text[len(indent):])
    # (offset in the line, nesting depth, rank) of every place a line break may go
    points, depth, offset, prev = [], 0, len(indent), None
    for t in toks:
        if _significant(t):
            binary = t in _BEFORE and (prev is not None and (prev in (")", "]") or prev[:1].isalnum()
                                                             or prev[:1] in "_\"'"))
            if binary:
                points.append((offset, depth, _BREAK_RANK.get(t, 2)))
            if t in "([{":
                depth += 1
            elif t in ")]}":
                depth -= 1
            if t in _AFTER:
                points.append((offset + len(t), depth, _BREAK_RANK.get(t, 3)))
            prev = t
        offset += len(t)
    lines, start, lead = [], len(indent), indent
    cont = indent + INDENT * 2
    while len(lead) + len(text) - start > width:
        room = width - len(lead)
        fits = [p for p in points if start < p[0] and p[0] - start <= room and text[start:p[0]].strip()]
        late = [p for p in fits if p[0] - start >= room * 0.4]
        pool = late or fits
        if not pool:
            later = [p for p in points if p[0] > start and text[start:p[0]].strip()]
            if not later:
                break
            pick = later[0]
        else:
            pick = min(pool, key=lambda p: (p[1], p[2], -p[0]))
        lines.append(lead + text[start:pick[0]].strip())
        start, lead = pick[0], cont
        while start < len(text) and text[start] == " ":
            start += 1
    lines.append(lead + text[start:].strip())
    return lines


def _wrap_comment(text: str, indent: str, width: int) -> list[str]:
    words = text.strip().split(" ")
    lines, current = [], indent + words[0]
    for w in words[1:]:
        if len(current) + 1 + len(w) > width and current.strip() not in ("/*", "/* =="):
            lines.append(current)
            current = indent + "   " + w
        else:
            current += " " + w
    return lines + [current]
