"""The PTX intrinsics two dialects share: CUDA C++ and NVIDIA's OpenCL C both take inline PTX.

Tensor-core tiles (``mma.sync``, DMMA), their fragment loads (``ldmatrix``) and the ``cp.async``
chunk loaders ask their dialect for these statements; `CudaDialect` and `PtxOpenCLDialect` mix
this class in, so one method renders each instruction for both. Where the two C dialects differ,
a hook says how: `_asm_helper` (OpenCL spells the keyword ``__asm__``, clang's OpenCL mode knows
no ``asm``), ``_ldmatrix_pointers`` (OpenCL C has no references), ``_global_space`` (the source
pointer of a copy is ``__global`` in OpenCL) and `shared_address` (a generic pointer converted on
CUDA, a ``__local`` pointer's own value on OpenCL).
"""
from __future__ import annotations

from . import ptx


class PtxIntrinsics:
    """Mixin: the PTX statements of a dialect whose compiler accepts inline PTX."""

    #: ldmatrix helpers take their registers by pointer (C without references).
    _ldmatrix_pointers = False
    #: Address-space qualifier of a global pointer handed to a copy helper.
    _global_space = ""
    #: Before each sm_90a-only PTX line (wgmma): "" where the compiler assembles for sm_90a;
    #: `ptx.SM90A_MARK` where it does not (NVIDIA's OpenCL driver), whose PTX nvJitLink unmarks.
    _sm90a_mark = ""

    def _asm_helper(self, built: tuple[str, str]) -> str:
        """Record a PTX helper ``(name, definition)`` (as the dialect spells inline assembly);
        returns its name."""
        return self._use(built)

    def shared_address(self, pointer: str) -> str:   # pragma: no cover - each dialect says
        raise NotImplementedError

    # -- statements end with ';', expressions do not ---------------------------------------------
    def ldmatrix(self, regs: list[str], addr: str, trans: bool) -> str:
        """Statement: ``ldmatrix`` of ``len(regs)`` 8 x 8 blocks of 16-bit elements into the 32-bit
        lvalues ``regs``, this lane addressing the row at shared address ``addr``."""
        name = self._asm_helper(ptx.ldmatrix(len(regs), trans, self._ldmatrix_pointers))
        args = [f"&{r}" for r in regs] if self._ldmatrix_pointers else regs
        return f"{name}({', '.join(args)}, {addr});"

    def cvt_tf32(self, value: str) -> str:
        """Expression: the tf32 bits of float ``value``, rounded to nearest."""
        return f"{self._asm_helper(ptx.cvt_tf32())}({value})"

    def pack_half2(self, kind: str, hi: str, lo: str) -> str:
        """Expression: two floats as one word of two ``kind`` ("f16x2" / "bf16x2") halves."""
        return f"{self._asm_helper(ptx.cvt_pack(kind))}({hi}, {lo})"

    def mma_sync(self, shape: tuple[int, int, int], ptx_type: str, acc_type: str, acc_word: str,
                 acc: str, a: str, b: str, a_regs: int, b_regs: int) -> str:
        """Statement: ``acc[0..4) += a @ b`` by one warp-wide ``mma.sync`` of ``shape`` on
        ``ptx_type`` operands (register arrays ``a``, ``b``) into ``acc_type`` accumulators."""
        constraint = {"f32": "f", "i32": "r"}[acc_word]
        name = self._asm_helper(ptx.mma_sync(*shape, ptx_type, acc_type, constraint, self.c_type(acc_word),
                                             a_regs, b_regs))
        return f"{name}({acc}, {a}, {b});"

    def dmma(self, shape: tuple[int, int, int], acc: str, a: str, b: str) -> str:
        """Statement: ``acc += a @ b`` by one warp-wide f64 ``mma.sync`` of ``shape``."""
        return f"{self._asm_helper(ptx.dmma(*shape))}({acc}, {a}, {b});"

    def cp_async(self, cache: str, nbytes: int, dst: str, src: str, src_bytes: str | None = None) -> str:
        """Statement: asynchronous copy of ``nbytes`` global -> shared (``src_bytes`` read, the rest
        zero-filled, when given)."""
        name = self._asm_helper(ptx.cp_async(cache, nbytes, src_bytes is not None, self._global_space))
        tail = f", {src_bytes}" if src_bytes is not None else ""
        return f"{name}({dst}, {src}{tail});"

    def cp_async_commit(self) -> str:
        return f"{self._asm_helper(ptx.cp_async_commit())}();"

    def cp_async_wait(self, pending: int) -> str:
        return f"{self._asm_helper(ptx.cp_async_wait(pending))}();"

    def cp_async_wait_all(self) -> str:
        return f"{self._asm_helper(ptx.cp_async_wait_all())}();"

    def st_shared_v4(self, addr: str, regs: list[str]) -> str:
        return f"{self._asm_helper(ptx.st_shared_v4())}({addr}, {', '.join(regs)});"

    # -- warpgroup MMA (sm_90a: CUDA, and NVIDIA's OpenCL where its PTX is built for sm_90a) --------
    def wgmma(self, n: int, k: int, kind: str, trans: tuple[int, int] | None, acc: str,
              desc_a: str, desc_b: str, acc_type: str = "f32", rhs_kind: str | None = None,
              overwrite: bool = False) -> str:
        """Statement: issue one asynchronous warpgroup MMA 64 x n x k into ``acc[0..n/2)``
        (``acc_type`` f32 or s32; ``rhs_kind`` where b's type differs from a's: e4m3 x e5m2;
        ``overwrite``: D = A B, the accumulators' old values unread)."""
        return f"{self._asm_helper(ptx.wgmma(n, k, kind, trans, acc_type, rhs_kind, overwrite, self._sm90a_mark))}({acc}, {desc_a}, {desc_b});"

    def wgmma_rs(self, n: int, kind: str, acc: str, a: str, desc_b: str, trans_b: int = 0) -> str:
        """Statement: one asynchronous 64 x n x 16 warpgroup MMA with A from the four 32-bit
        registers ``a[0..4)`` (16-bit kinds) and B from shared memory (`ptx.wgmma_rs`)."""
        return f"{self._asm_helper(ptx.wgmma_rs(n, kind, trans_b, self._sm90a_mark))}({acc}, {a}, {desc_b});"

    def wgmma_fence(self) -> str:
        return f"{self._asm_helper(ptx.wgmma_fence(self._sm90a_mark))}();"

    def wgmma_commit(self) -> str:
        return f"{self._asm_helper(ptx.wgmma_commit(self._sm90a_mark))}();"

    def wgmma_wait(self, pending: int) -> str:
        return f"{self._asm_helper(ptx.wgmma_wait(pending, self._sm90a_mark))}();"

    def pin_registers(self, array: str, count: int, word: str = "f32") -> str:
        """Statement: keep the compiler from moving accesses of ``array[0..count)`` (of neutral
        word ``word``: f32 or i32) across here."""
        return f"{self._asm_helper(ptx.pin_registers(count, word))}({array});"

    def fence_proxy_async(self) -> str:
        return f"{self._asm_helper(ptx.fence_proxy_async())}();"
