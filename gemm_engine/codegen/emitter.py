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


def has_loop(code: str) -> bool:
    """Whether ``code`` holds a loop that `roll` made."""
    return _ROLLED.search(code) is not None


_ROLLED = re.compile(r"#pragma unroll\nfor \(int (\w+) = 0; \1 < \d+; \+\+\1\) \{\n")


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
    over ``width`` characters broken at safe points; the tokens themselves are unchanged. Laying out
    what it laid out changes nothing."""
    out: list[str] = []
    # Open brackets, innermost last, as [column, kind, indent]: a block (a brace that ends its line;
    # column: of its statements) or a bracket the statement goes on past (column: of the lines that
    # continue it; indent: the first such line's own, so that later lines keep their alignment).
    open_: list[list] = []
    hang = 0                   # levels added by brace-less control headers above
    statement = 0              # the column of the current statement's first line
    goes_on = False            # the last line ended in an operator: the statement goes on
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
        blocks = [b for b in open_ if b[1] == "block"]
        column = (blocks[-1][0] if blocks else 0) + len(INDENT) * hang
        if line.startswith("#"):
            out.append(" " * column + line if line.startswith("#pragma") else line)
            continue
        if line.startswith("/*") and "*/" not in line:      # a comment over several lines: as it is
            out.append(" " * column + line)
            in_comment = True
            continue
        code = [t for t in tokens(line) if _significant(t)]
        inner = open_[-1] if open_ else None
        carried = inner is not None and inner[1] != "block"
        if carried:
            indent = len(raw) - len(raw.lstrip())
            if inner[2] is None:
                inner[2] = indent
            column = inner[0] + max(0, indent - inner[2])
        elif goes_on or (code and code[0] in _LEADING):
            column = statement + 2 * len(INDENT)
        else:
            if code and code[0] == "}" and blocks:
                column = blocks[-1][0] - len(INDENT)
            statement = column
        outside = (column if carried else statement) + 2 * len(INDENT)   # where emit reads a break outside brackets
        pieces = _wrap(line, column, outside, width) if column + len(line) > width else [" " * column + line]
        out += pieces
        for piece in pieces:
            at = len(piece) - len(piece.lstrip())
            piece_code = [t for t in tokens(piece) if _significant(t)]
            for k, t in enumerate(piece_code):
                last = k == len(piece_code) - 1
                if t in "([{":
                    if t == "{" and last and piece is pieces[-1]:
                        open_.append([at + len(INDENT), "block", None])
                        hang = 0
                    else:
                        open_.append([at + len(INDENT) * (1 if last else 2), "bracket", None])
                elif t in ")]}" and open_:
                    open_.pop()
        inside = bool(open_) and open_[-1][1] != "block"
        goes_on = bool(code) and code[-1] in _TRAILING and not inside
        if inside or goes_on:
            continue
        header = (_HEADER.match(line) and code[-1] == ")") or _BARE_HEADER.match("".join(code))
        if header:
            hang += 1
        elif code and code[-1] in (";", "}"):
            hang = 0
    return "\n".join(_without_stray_blanks(out))


def _without_stray_blanks(lines: list[str]) -> list[str]:
    """Blank lines the templates leave (an empty piece joined in) dropped where they separate
    nothing: at a block's start or end, or after another blank line."""
    out: list[str] = []
    for k, line in enumerate(lines):
        if not line:
            after = next((x.strip() for x in lines[k + 1:] if x.strip()), "}")
            if not out or not out[-1] or out[-1].endswith("{") or after.startswith("}"):
                continue
        out.append(line)
    return out


#: A line that starts with one of these continues the statement above (the wrap breaks before them).
_LEADING = {"&&", "||", "?", "+", "-", "|", "^", "<<", ">>", "<", ">", "<=", ">=", "==", "!=", "/", "%"}
#: A line that ends with one of these is continued by the next.
_TRAILING = {",", "=", "+=", "-=", "*=", "/=", "|=", "&=", "^=", "&&", "||", "?", "+", "-", "|", "^"}


# -- breaking long lines -------------------------------------------------------------------------
_AFTER = {",", "=", "+=", "-=", "*=", "/=", "|=", "&=", "^="}
_BEFORE = {"&&", "||", "?", ":", "::", "+", "-", "|", "^", "<<", ">>", "<", ">", "<=", ">=", "==", "!="}
_BREAK_RANK = {",": 0, "&&": 1, "||": 1, "?": 1, ":": 1, "::": 1}


def _wrap(line: str, column: int, outside: int, width: int) -> list[str]:
    """``line`` (stripped) at ``column``, broken where it can be into lines of at most ``width``: at
    the outermost level that leaves a first line of some length, after a comma or an assignment,
    before an operator. A continuation line goes two levels right of the line that opened the
    bracket it is in, at ``outside`` where it is in none this line opened: where `emit` puts it
    when it reads the lines again."""
    if line.startswith(("/*", "//")) and line.endswith("*/") and line.count("/*") == 1:
        return _wrap_comment(line, " " * column, width)
    # (offset, depth, rank, opener offset) of every place a break may go; opener: the innermost
    # bracket open there (None: none this line opened)
    points, stack, offset, prev = [], [], 0, None
    header = _HEADER.match(line) is not None
    for t in tokens(line):
        if _significant(t):
            if header and not stack and prev == ")" and t not in (";", "{"):   # after `if (...)`: the body
                points.append((offset, -1, 0, "body"))
                header = False
            binary = t in _BEFORE and prev is not None and (prev in (")", "]") or prev[:1].isalnum()
                                                            or prev[:1] in "_\"'")
            if binary:
                points.append((offset, len(stack), _BREAK_RANK.get(t, 2), stack[-1] if stack else None))
            if t in "([{":
                stack.append(offset)
            elif t in ")]}" and stack:
                stack.pop()
            if t in _AFTER:
                points.append((offset + len(t), len(stack), _BREAK_RANK.get(t, 3), stack[-1] if stack else None))
            prev = t
        offset += len(t)
    # A break inside a short bracket (``&(a + b)[...]``) splits what reads as one term: ranked deeper.
    closer, opened = {}, []
    for m in re.finditer(r"[()\[\]{}]", _blank_strings(line)):
        if m.group() in "([{":
            opened.append(m.start())
        elif opened:
            closer[opened.pop()] = m.start()
    points = [(o, d + (2 if b not in (None, "body") and closer.get(b, len(line)) - b < 40 else 0), r, b)
              for o, d, r, b in points]
    lines, starts = [], [(0, column)]       # (offset, column) where each output line begins
    start, at = 0, column
    while at + len(line) - start > width:
        room = width - at
        fits = [p for p in points if start < p[0] and p[0] - start <= room and line[start:p[0]].strip()]
        pool = [p for p in fits if p[0] - start >= room * 0.4] or fits
        if not pool:
            pool = [p for p in points if p[0] > start and line[start:p[0]].strip()][:1]
            if not pool:
                break
        pick = min(pool, key=lambda p: (p[1], p[2], -p[0]))
        lines.append(" " * at + line[start:pick[0]].strip())
        if pick[3] == "body":         # the body of a control header one level in, as emit reads it
            at = column + len(INDENT)
            outside = at + 2 * len(INDENT)
        elif pick[3] is not None:     # under the line that opened the bracket
            at = [c for o, c in starts if o <= pick[3]][-1] + 2 * len(INDENT)
        else:
            at = outside
        start = pick[0]
        while start < len(line) and line[start] == " ":
            start += 1
        starts.append((start, at))
    lines.append(" " * at + line[start:].strip())
    return lines


def _blank_strings(line: str) -> str:
    """``line`` with the insides of its string and character literals and comments blanked out."""
    return "".join(t if not t.startswith(('"', "'", "/*", "//")) else " " * len(t) for t in tokens(line))


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
