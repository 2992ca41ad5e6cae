"""Paired stores: the results of a gated epilogue, each from a pair of output columns (2j, 2j + 1).

A gated activation (epilogue/activations.py `Gated`: SwiGLU...) reads the gate and up projections'
pre-activations of one output element from two adjacent GEMM columns, interleaved in the weights,
so that both lie in the accumulators of one unit: every tile hands a unit's columns out two at a
time, the pair's first at an even column and its second next (mma.sync: c0 c1 of a row; wgmma:
registers 2i, 2i + 1; WMMA: 8 columns in a row; a register tile: its row's columns, where its width
is even). `column_pairs` takes the stage's elements in that order and matches them by their column
expressions (a symbolic part, multiples of even tile widths, and an integer offset), and
`write_pairs` stores each pair's result(s) through the epilogue's `pre` and `pair_values`: one
result at column j of a half-width output (a gated activation), or two, at 2j and 2j + 1 of a
full-width one (its derivative).

Every global level whose writer goes through `GlobalMatmul.write_output` stores a paired epilogue
here, whichever writer it composes: directly, or (`TmaStoreWriter.write_paired`: one result a pair)
into the writer's staging tile at half the column, which TMA then stores through a map of the
half-width output (bf16 8192 x 4096 -> 2 x 14336 SwiGLU on the H100: direct 2-byte stores left the
fused kernel 0.36-0.56 ms behind the plain GEMM's 2.47-2.51 ms, the gate's math none of it). A
composition that cannot is refused at setup (`check_pairs`): a batch level that reduces per element
(split-K), a global level that stores per element (the skinny one), a TMA writer whose staging does
not fit the pairs (two results a pair, parts), a stage whose elements do not come in pairs (an odd
tile width).
"""
from __future__ import annotations

from ...epilogue.spec import hoisted_scales
from ...errors import SetupError


def _terms(expr: str) -> list[str]:
    """The top-level ``+`` terms of a C expression (parentheses kept)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "+" and depth == 0:
            out.append(expr[start:i].strip())
            start = i + 1
    out.append(expr[start:].strip())
    return out


def _wrapped(term: str) -> bool:
    """Whether ``term`` is one parenthesized expression (its first parenthesis closes at its end)."""
    if not (term.startswith("(") and term.endswith(")")):
        return False
    depth = 0
    for i, ch in enumerate(term):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return i == len(term) - 1
    return False


def split_offset(expr: str) -> tuple[tuple[str, ...], int | None]:
    """(sorted symbolic terms, integer offset) of a sum of terms; offset None where the expression is
    not a plain sum (a subtraction at the top: nothing is assumed about it)."""
    symbols, offset = [], 0
    for term in _terms(expr):
        if _wrapped(term) and len(_terms(term[1:-1])) > 1:
            inner, more = split_offset(term[1:-1])
            if more is None:
                return (expr,), None
            symbols += inner
            offset += more
        elif term.isdigit():
            offset += int(term)
        elif "-" in term and not _wrapped(term):
            return (expr,), None
        else:
            symbols.append(term)
    return tuple(sorted(symbols)), offset


def column_pairs(stage, stage_cfg, d, emit) -> str:
    """``stage.write`` with its elements taken two at a time: ``emit(row, col, first, second)`` for
    the pair at (row, col) and (row, col + 1), col even. SetupError naming the stage where an
    element's partner does not follow it."""
    pending: list = []

    def writer(row, col, value):
        if not pending:
            pending.append((row, col, value))
            return ""
        (r0, c0, v0), = pending
        pending.clear()
        (rs0, ro0), (rs, ro) = split_offset(r0), split_offset(row)
        (cs0, co0), (cs, co) = split_offset(c0), split_offset(col)
        if None in (ro0, ro, co0, co) or (rs0, ro0) != (rs, ro) or cs0 != cs or co0 % 2 or co != co0 + 1:
            raise SetupError(stage.name, f"a gated epilogue pairs output columns 2j and 2j + 1 in one unit, but "
                                         f"this stage hands out ({r0}, {c0}) and then ({row}, {col})")
        return emit(r0, c0, v0, value)

    code = stage.write(stage_cfg, d, writer)
    if pending:
        row, col, _ = pending[0]
        raise SetupError(stage.name, f"a gated epilogue pairs output columns 2j and 2j + 1 in one unit, but the "
                                     f"partner of ({row}, {col}) never follows it")
    return code


def write_pairs(g, cfg, d, scope, staged=None) -> str:
    """The stores of a cube's tile under a paired epilogue (see the module docstring). ``staged``:
    where one result a pair goes instead of global memory (a writer's staging tile), called as
    ``staged(row, half_col, value)`` with the tile's row and half-width column."""
    ep, out, t = cfg.epilogue, scope.out, d.c_type(cfg.epilogue.compute)
    hoist: dict = {}

    def emit(row, col, first, second):
        grow, gcol = f"{scope.m0} + {row}", f"{scope.n0} + {col}"
        pair = f"(({gcol}) >> 1)"
        values = ep.pair_values(d, "ge_g", "ge_u", grow, pair, hoist)
        if staged is not None:
            stores = [staged(row, f"(({col}) >> 1)", values[0])]
        elif ep.pair_outputs == 1:
            stores = [d.store_global(cfg.out, out.ptr, f"({grow}) * {out.ld} + {pair}", values[0])]
        else:
            stores = [d.store_global(cfg.out, out.ptr, f"({grow}) * {out.ld} + {gcol} + {i}", v)
                      for i, v in enumerate(values)]
        body = "\n".join([f"const {t} ge_g = {ep.pre(d, first, grow, gcol, hoist)};",
                          f"const {t} ge_u = {ep.pre(d, second, grow, f'{gcol} + 1', hoist)};", *stores])
        return g.guarded(cfg, scope, row, col, f"{{\n{body}\n}}")

    code = column_pairs(g.stage, cfg.stage, d, emit)
    if not hoist:
        return code
    bounds = {**({"lhs_scale": scope.m, "row_scale": scope.m} if cfg.check_m else {}), **({"rhs_scale": scope.n} if cfg.check_n else {})}
    return "\n".join(["{", *hoisted_scales(hoist, bounds), code, "}"])


def check_pairs(batch, cfg, d) -> None:
    """SetupError unless the composition of batch level ``batch`` (set up as ``cfg``) can store a
    paired epilogue (see the module docstring); nothing to check for other epilogues."""
    if not cfg.epilogue.paired:
        return
    g = batch.global_
    why = "a gated epilogue reads two output columns for each result"
    if not batch.forwards_pairs:
        raise SetupError(batch.name, f"{why}, but this batch level applies the epilogue per element")
    if not g.stores_pairs:
        raise SetupError(g.name, f"{why}, but this global level stores element by element")
    if cfg.global_.writer.tma_store and not g.writer.stages_pairs(cfg.global_):
        raise SetupError(getattr(g.writer, "name", type(g.writer).__name__),
                         f"{why}, and this writer stages only one result a pair of whole 128-byte bands in one "
                         f"part through the output's tensor map (choose tma_store=False or store_parts=1)")
    tile = getattr(cfg.global_.stage, "tile", None)
    width = getattr(tile, "tile_n", None)
    if width is None or width % 2:
        raise SetupError(g.stage.name, f"{why} from one unit's accumulators, which needs an even tile width "
                                       f"(tile_n = {width})")
    column_pairs(g.stage, cfg.global_.stage, d, lambda row, col, first, second: "")
