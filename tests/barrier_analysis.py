"""Static check of rendered OpenCL C: is every barrier reached by every work-item of the group?

OpenCL requires that a work-group barrier be reached by all of the group's work-items or by none;
a barrier under a branch whose condition differs between work-items is undefined behaviour (PoCL
may hang, abort or compute garbage; NVIDIA may deadlock). `barrier_problems(source)` parses the
kernels of one source (the C the templates render: statements, blocks, if / for / while / do /
switch, declarations and assignments) and follows which values depend on the work-item:

* seeds: ``UNIT_ID`` and the work-item builtins (``get_local_id``, ``get_global_id``, ...);
* a variable is work-item dependent when any value assigned to it is, when it is an array written
  at a work-item-dependent index, or when it is assigned under work-item-dependent control flow;
  loops are followed to a fixed point; everything else (kernel arguments, ``CUBE_ID``, constants,
  loop counters of uniform loops) is uniform.

It reports a barrier (``SYNC_CUBE()``, ``barrier(...)``, or a call of a function that holds one)
under a work-item-dependent ``if`` / loop / ``switch`` condition, after a ``return`` under one, or
in a loop that a ``break`` / ``continue`` under one may leave early. Conservative: a value loaded
from memory at a uniform address is uniform, any other load is not.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

SEEDS = {"UNIT_ID", "get_local_id", "get_global_id", "get_local_linear_id", "get_global_linear_id",
         "get_sub_group_local_id"}
BARRIERS = {"SYNC_CUBE", "barrier", "work_group_barrier"}
_TYPE = re.compile(r"(unsigned|signed|const|volatile|static|inline|restrict|GLOBAL|LOCAL|__global|__local|"
                   r"__private|__constant|struct|void|size_t|bool|(u?(char|short|int|long)|float|double|half)\d*)$")
_TOKEN = re.compile(r"\s+|//[^\n]*|/\*.*?\*/|#[^\n]*|(?P<tok>[A-Za-z_]\w*|\d[\w.]*(?:[eE][-+]?\d+)?f?|"
                    r"'(?:\\.|[^'])*'|\"(?:\\.|[^\"])*\"|<<=|>>=|->|\+\+|--|&&|\|\||[=!<>+\-*/%&|^]=|<<|>>|\S)",
                    re.S | re.M)
_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


@dataclass
class Problem:
    kernel: str
    line: int
    what: str

    def __str__(self):
        return f"{self.kernel}, line {self.line}: {self.what}"


def tokens(source: str) -> list[tuple[str, int]]:
    out, line = [], 1
    for m in _TOKEN.finditer(source):
        if m.group("tok"):
            out.append((m.group("tok"), line))
        line += m.group(0).count("\n")
    return out


@dataclass
class _Context:
    divergent: tuple = ()          # the work-item-dependent conditions enclosing this point
    loops: tuple = ()              # ids of the enclosing loops


@dataclass
class _Pass:
    toks: list
    typedefs: set
    barrier_functions: set
    tainted: dict                  # binding id (token index of its declaration) -> bool
    scopes: list = field(default_factory=lambda: [{}])
    barriers: list = field(default_factory=list)       # (token index, context)
    early_returns: list = field(default_factory=list)  # (token index, condition)
    divergent_exits: dict = field(default_factory=dict)  # loop id -> condition
    changed: bool = False

    # -- names -------------------------------------------------------------------------------
    def binding(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def is_tainted(self, i, j) -> bool:
        for k in range(i, j):
            tok = self.toks[k][0]
            if tok in SEEDS:
                return True
            b = self.binding(tok)
            if b is not None and self.tainted.get(b):
                return True
        return False

    def taint(self, binding, value: bool):
        if value and not self.tainted.get(binding):
            self.tainted[binding] = True
            self.changed = True

    def text(self, i, j) -> str:
        return " ".join(t for t, _ in self.toks[i:j])

    # -- statements ----------------------------------------------------------------------------
    def close(self, i, opener="(", closer=")") -> int:
        depth = 0
        while True:
            tok = self.toks[i][0]
            depth += tok == opener
            depth -= tok == closer
            if depth == 0:
                return i
            i += 1

    def end_of_simple(self, i) -> int:
        depth = 0
        while True:
            tok = self.toks[i][0]
            if tok in "([{":
                depth += 1
            elif tok in ")]}":
                depth -= 1
            elif tok == ";" and depth == 0:
                return i
            i += 1

    def nested(self, ctx, i, j):
        """The context inside a branch or loop whose condition is tokens i:j."""
        if self.is_tainted(i, j):
            return _Context(ctx.divergent + (self.text(i, j),), ctx.loops)
        return ctx

    def statement(self, i, ctx) -> int:
        tok = self.toks[i][0]
        if tok == "{":
            self.scopes.append({})
            i += 1
            while self.toks[i][0] != "}":
                i = self.statement(i, ctx)
            self.scopes.pop()
            return i + 1
        if tok == ";":
            return i + 1
        if tok in ("if", "switch", "while"):
            end = self.close(i + 1)
            inner = self.nested(ctx, i + 2, end)
            if tok == "while":
                inner = _Context(inner.divergent, inner.loops + (i,))
            i = self.statement(end + 1, inner)
            if tok == "if" and i < len(self.toks) and self.toks[i][0] == "else":
                i = self.statement(i + 1, inner)
            return i
        if tok == "do":
            body = i + 1
            end_body = self._skip(body)
            cond_end = self.close(end_body + 1)
            inner = self.nested(ctx, end_body + 2, cond_end)
            self.statement(body, _Context(inner.divergent, inner.loops + (i,)))
            return cond_end + 2
        if tok == "for":
            end = self.close(i + 1)
            self.scopes.append({})
            init_end = self.end_of_simple(i + 2)
            self.simple(i + 2, init_end, ctx)
            cond_end = self.end_of_simple(init_end + 1)
            self.simple(cond_end + 1, end, ctx)             # the step (an expression)
            inner = self.nested(ctx, init_end + 1, end)     # condition and step decide the trip count
            i = self.statement(end + 1, _Context(inner.divergent, inner.loops + (i,)))
            self.scopes.pop()
            return i
        if tok == "return":
            end = self.end_of_simple(i)
            if ctx.divergent:
                self.early_returns.append((i, ctx.divergent[-1]))
            return end + 1
        if tok in ("break", "continue"):
            if ctx.divergent and ctx.loops:
                self.divergent_exits.setdefault(ctx.loops[-1], ctx.divergent[-1])
            return i + 2
        end = self.end_of_simple(i)
        self.simple(i, end, ctx)
        return end + 1

    def _skip(self, i) -> int:
        """Index after statement i (structure only)."""
        tok = self.toks[i][0]
        if tok == "{":
            return self.close(i, "{", "}") + 1
        return self.end_of_simple(i) + 1

    def simple(self, i, j, ctx):
        """A declaration or an expression statement, tokens i:j (no terminating ';')."""
        toks = [t for t, _ in self.toks[i:j]]
        if any(t in BARRIERS or t in self.barrier_functions for t in toks):
            self.barriers.append((i, ctx))
        if not toks:
            return
        first = toks[0]
        if _TYPE.match(first) or first in self.typedefs:
            self._declaration(i, j, ctx)
            return
        # Expression: each top-level assignment taints its target (value, index or control flow).
        depth, start = 0, i
        for k in range(i, j):
            tok = self.toks[k][0]
            depth += tok in "([{"
            depth -= tok in ")]}"
            if depth == 0 and tok in _ASSIGN:
                target = next((self.toks[m][0] for m in range(start, k) if re.match(r"[A-Za-z_]\w*$", self.toks[m][0])
                               and self.binding(self.toks[m][0]) is not None), None)
                if target is not None:
                    value = self.is_tainted(k + 1, j) or self.is_tainted(start, k) or bool(ctx.divergent)
                    self.taint(self.binding(target), value)

    def _declaration(self, i, j, ctx):
        # Split at top-level commas: each declarator "name [dims] [= init]".
        depth, parts, start = 0, [], i
        for k in range(i, j):
            tok = self.toks[k][0]
            depth += tok in "([{"
            depth -= tok in ")]}"
            if depth == 0 and tok == ",":
                parts.append((start, k))
                start = k + 1
        parts.append((start, j))
        for a, b in parts:
            eq = next((k for k in range(a, b) if self.toks[k][0] == "="), b)
            # The declarator: the last name before its initializer or its array dimensions.
            stop = next((k for k in range(a, eq) if self.toks[k][0] == "["), eq)
            names = [k for k in range(a, stop) if re.match(r"[A-Za-z_]\w*$", self.toks[k][0])
                     and not _TYPE.match(self.toks[k][0]) and self.toks[k][0] not in self.typedefs]
            if not names:
                continue
            name_at = names[-1]
            name = self.toks[name_at][0]
            self.scopes[-1][name] = name_at
            value = (eq < b and self.is_tainted(eq + 1, b)) or bool(ctx.divergent)
            self.taint(name_at, value)


def _functions(toks) -> list[tuple[str, bool, int, int]]:
    """(name, is_kernel, start of the body's '{', index of its '}') for each top-level function."""
    out, depth, i = [], 0, 0
    while i < len(toks):
        tok = toks[i][0]
        if tok == "{" and depth == 0 and i and toks[i - 1][0] == ")":
            # The parameter list's '(' and the name before it.
            k, d = i - 1, 0
            while True:
                d += toks[k][0] == ")"
                d -= toks[k][0] == "("
                if d == 0:
                    break
                k -= 1
            name = toks[k - 1][0]
            head = {t for t, _ in toks[max(0, k - 12):k]}
            end, d = i, 0
            while True:
                d += toks[end][0] == "{"
                d -= toks[end][0] == "}"
                if d == 0:
                    break
                end += 1
            out.append((name, bool(head & {"KERNEL", "__kernel", "kernel"}), i, end))
            i = end + 1
            continue
        depth += tok == "{"
        depth -= tok == "}"
        i += 1
    return out


def barrier_problems(source: str) -> list[Problem]:
    return analyse(source)[0]


def analyse(source: str) -> tuple[list[Problem], int]:
    """(the problems, how many barriers the kernels hold): a parse that saw no barrier in a source
    that has some would pass vacuously, so callers check the count too."""
    toks = tokens(source)
    typedefs = {toks[i + 1 + j][0] for i, (t, _) in enumerate(toks) if t == "typedef"
                for j in range(0, 6) if i + 2 + j < len(toks) and toks[i + 2 + j][0] == ";"}
    functions = _functions(toks)
    barrier_functions: set = set()
    for _ in functions:   # functions that hold a barrier, directly or through a call
        for name, _, a, b in functions:
            if any(t in BARRIERS or t in barrier_functions for t, _ in toks[a:b]):
                barrier_functions.add(name)
    problems, seen = [], 0
    for name, is_kernel, a, b in functions:
        if not is_kernel:
            continue
        tainted: dict = {}
        for _ in range(20):   # to a fixed point: loops carry values around
            p = _Pass(toks, typedefs, barrier_functions, tainted)
            p.statement(a, _Context())
            if not p.changed:
                break
        seen += len(p.barriers)
        for at, ctx in p.barriers:
            line = toks[at][1]
            if ctx.divergent:
                problems.append(Problem(name, line, f"barrier under the work-item-dependent condition "
                                                    f"({ctx.divergent[-1]})"))
            for ret, cond in p.early_returns:
                if ret < at:
                    problems.append(Problem(name, line, f"barrier after a return under ({cond}), line "
                                                        f"{toks[ret][1]}"))
            for loop in ctx.loops:
                if loop in p.divergent_exits:
                    problems.append(Problem(name, line, f"barrier in a loop left early under "
                                                        f"({p.divergent_exits[loop]})"))
    return problems, seen
