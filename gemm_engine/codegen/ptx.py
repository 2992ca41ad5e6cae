"""PTX intrinsics: every inline-``asm`` statement a CUDA kernel uses, named and defined once.

A component asks the CUDA dialect for an intrinsic (``d.mma_sync(...)``, ``d.cp_async(...)``);
the dialect returns a call of a small ``static __forceinline__`` function and records its
definition, which `CudaDialect.helpers_for` writes into the source only when the kernel calls it.
After inlining the function is exactly the ``asm`` statement it wraps (operands bound to the
caller's registers), so the SASS is what the statement alone would give; naming it keeps PTX out
of the components (a test refuses ``asm`` outside ``codegen/``) and makes the kernels readable.

Each builder here returns ``(name, definition)``; the name encodes every parameter that changes
the PTX text (shape, types, transpose bits, counts), so one name always means one definition.
Qualifiers are deliberate: ``volatile`` and the ``"memory"`` clobber where the statement orders
memory (copies, fences, barriers on async proxies); plain ``asm`` where it is a pure register
computation the compiler may schedule (mma, conversions).
"""
from __future__ import annotations

from .asm import asm_statement as _asm


def inline_function(name: str, params: str, body: str, ret: str = "void") -> tuple[str, str]:
    """(name, definition) of a builder: an ``INLINE`` function ``name`` of ``params`` around ``body``."""
    return name, f"INLINE {ret} {name}({params}) {{\n{body}\n}}\n"


_fn = inline_function


# -- shared memory -> registers ---------------------------------------------------------------------
def ldmatrix(count: int, trans: bool, pointers: bool = False) -> tuple[str, str]:
    """``ldmatrix.sync.aligned.m8n8.x{count}[.trans].shared.b16``: ``count`` 32-bit registers, each
    passed by reference (``pointers``: by pointer, for C without references: OpenCL), from the
    32-bit shared address ``addr`` (this lane's row)."""
    t = ".trans" if trans else ""
    regs = ", ".join(f"%{i}" for i in range(count))
    outs = [f'"=r"({"*" if pointers else ""}r{i})' for i in range(count)]
    params = ", ".join(f"unsigned{'*' if pointers else '&'} r{i}" for i in range(count)) + ", unsigned addr"
    name = f"ptx_ldmatrix_x{count}{'_trans' if trans else ''}{'_p' if pointers else ''}"
    return _fn(name, params, _asm(f"ldmatrix.sync.aligned.m8n8.x{count}{t}.shared.b16 {{{regs}}}, [%{count}];",
                                  outs, ['"r"(addr)']))


def cvt_tf32() -> tuple[str, str]:
    """float32 -> tf32 bits, rounded to nearest (ties away from zero): ``cvt.rna.tf32.f32``."""
    return _fn("ptx_cvt_rna_tf32", "float x",
               "    unsigned r;\n" + _asm("cvt.rna.tf32.f32 %0, %1;", ['"=r"(r)'], ['"f"(x)'], volatile=False)
               + "\n    return r;",
               ret="unsigned")


def cvt_pack(kind: str) -> tuple[str, str]:
    """Two float32 -> one 32-bit word of two ``kind`` halves (``f16x2`` / ``bf16x2``), ``hi`` in the
    upper half: ``cvt.rn.{kind}.f32``."""
    return _fn(f"ptx_cvt_rn_{kind}", "float hi, float lo",
               "    unsigned p;\n" + _asm(f"cvt.rn.{kind}.f32 %0, %1, %2;", ['"=r"(p)'], ['"f"(hi)', '"f"(lo)'],
                                       volatile=False) + "\n    return p;", ret="unsigned")


def ld_stream_u4() -> tuple[str, str]:
    """A 16-byte read-only global load of four 32-bit words that does not allocate in L1 (packed
    weights, read once)."""
    return _fn("ptx_ld_stream_u4", "const unsigned* p",
               "    uint4 v;\n"
               '    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"\n'
               '        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));\n    return v;',
               ret="uint4")


# -- tensor-core instructions ---------------------------------------------------------------------
def mma_sync(m: int, n: int, k: int, ptx: str, acc_ptx: str, constraint: str, ctype: str,
             a_regs: int, b_regs: int) -> tuple[str, str]:
    """``mma.sync.aligned.m{m}n{n}k{k}.row.col.{acc}.{ptx}.{ptx}.{acc}`` accumulating in place into
    four ``ctype`` registers ``c[0..4)`` from ``a[0..a_regs)`` and ``b[0..b_regs)``."""
    d = ", ".join(f"%{i}" for i in range(4))
    a = ", ".join(f"%{4 + i}" for i in range(a_regs))
    b = ", ".join(f"%{4 + a_regs + i}" for i in range(b_regs))
    outs = [f'"+{constraint}"(c[{i}])' for i in range(4)]
    ins = [f'"r"(a[{i}])' for i in range(a_regs)] + [f'"r"(b[{i}])' for i in range(b_regs)]
    name = f"ptx_mma_m{m}n{n}k{k}_{acc_ptx}_{ptx}"
    return _fn(name, f"{ctype}* c, const unsigned* a, const unsigned* b",
               _asm(f"mma.sync.aligned.m{m}n{n}k{k}.row.col.{acc_ptx}.{ptx}.{ptx}.{acc_ptx} "
                    f"{{{d}}}, {{{a}}}, {{{b}}}, {{{d}}};", outs, ins, volatile=False))


def dmma(m: int, n: int, k: int) -> tuple[str, str]:
    """``mma.sync.aligned.m{m}n{n}k{k}.row.col.f64.f64.f64.f64`` accumulating in place into ``m / 4``
    doubles ``c`` from ``m * k / 32`` doubles of a and ``k / 4`` of b (m8n8k4 on sm_80+, the m16n8
    shapes on sm_90+)."""
    nc, na, nb = m // 4, m * k // 32, k // 4
    d = ", ".join(f"%{i}" for i in range(nc))
    a = ", ".join(f"%{nc + i}" for i in range(na))
    b = ", ".join(f"%{nc + na + i}" for i in range(nb))
    outs = [f'"+d"(c[{i}])' for i in range(nc)]
    # A single double travels by value (m8n8k4's a and b, m16n8k4's b), more as an array.
    def operand(name: str, count: int) -> tuple[str, list[str]]:
        if count == 1:
            return f"double {name}", [f'"d"({name})']
        return f"const double* {name}", [f'"d"({name}[{i}])' for i in range(count)]

    (pa, ia), (pb, ib) = operand("a", na), operand("b", nb)
    params = f"double* c, {pa}, {pb}"
    return _fn(f"ptx_dmma_m{m}n{n}k{k}", params,
               _asm(f"mma.sync.aligned.m{m}n{n}k{k}.row.col.f64.f64.f64.f64 {{{d}}}, {{{a}}}, {{{b}}}, {{{d}}};",
                    outs, ia + ib, volatile=False))


#: The prefix that carries an sm_90a-only PTX line past an assembler targeting plain sm_90 (NVIDIA's
#: OpenCL driver): a comment there, unmarked again before nvJitLink builds for sm_90a
#: (runtime/sass.py).
SM90A_MARK = "//@sm_90a "


def _marked(text: str, mark: str) -> str:
    """``text`` with ``mark`` before each of its PTX lines."""
    return "".join(mark + line for line in text.splitlines(keepends=True)) if mark else text


def wgmma(n: int, k: int, kind: str, trans: tuple[int, int] | None, acc: str = "f32",
          rhs_kind: str | None = None, overwrite: bool = False, mark: str = "") -> tuple[str, str]:
    """``wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc}.{kind}.{rhs_kind}``: ``n / 2`` accumulators
    per unit (``acc``: f32, or s32 for s8), both operands from shared memory through 64-bit
    descriptors, scale-d 1 (accumulate), for the float kinds scales 1, and the transpose immediates
    ``trans`` (None: tf32 and the 8-bit kinds, which read K-major operands only)."""
    rhs_kind = rhs_kind or kind
    regs = n // 2
    regs_list = ", ".join(f"%{i}" for i in range(regs))
    constraint, ctype = ("r", "int") if acc == "s32" else ("f", "float")
    outs = [f'"+{constraint}"(acc[{i}])' for i in range(regs)]
    # Integer wgmma takes no imm-scale-a/b (negation); the float kinds take them.
    scales = "" if kind in _NO_SCALE_KINDS else ", 1, 1"
    imm = "" if trans is None else f", {trans[0]}, {trans[1]}"
    suffix = "" if trans is None else f"_t{trans[0]}{trans[1]}"
    types = kind if rhs_kind == kind else f"{kind}_{rhs_kind}"
    name = f"ptx_wgmma_m64n{n}k{k}_{acc}_{types}{suffix}{'_d0' if overwrite else ''}"
    body = _asm(_marked(f"{{\n.reg .pred p;\nsetp.ne.b32 p, %{regs + 2}, 0;\n"
                        f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{acc}.{kind}.{rhs_kind} "
                        f"{{{regs_list}}}, %{regs}, %{regs + 1}, p{scales}{imm};\n}}\n", mark),
                outs, ['"l"(desc_a)', '"l"(desc_b)', f'"r"({0 if overwrite else 1})'])
    return _fn(name, f"{ctype}* acc, unsigned long long desc_a, unsigned long long desc_b", body)


def wgmma_rs(n: int, kind: str, trans_b: int, mark: str = "") -> tuple[str, str]:
    """``wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind}`` with the A operand in four
    32-bit registers per unit (the m64 x k16 fragment: lane (g, t) of warp w holds rows 16w + g and
    16w + g + 8, k pairs 2t and 2t + 8, as mma.sync's A) and B from shared memory through its
    descriptor; accumulates into ``acc[0..n/2)`` (scale-d 1), imm-trans-b ``trans_b`` (1: B is
    N-major). A's registers are read asynchronously: they must keep their values until a
    ``wgmma.wait_group`` says the batch is done, and a ``wgmma.fence`` must follow their writes."""
    regs = n // 2
    regs_list = ", ".join(f"%{i}" for i in range(regs))
    outs = [f'"+f"(acc[{i}])' for i in range(regs)]
    ins = [f'"r"(a[{i}])' for i in range(4)] + ['"l"(desc_b)']
    a = ", ".join(f"%{regs + i}" for i in range(4))
    body = _asm(_marked(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{kind}.{kind} "
                        f"{{{regs_list}}}, {{{a}}}, %{regs + 4}, 1, 1, 1, {trans_b};", mark), outs, ins)
    return _fn(f"ptx_wgmma_rs_m64n{n}k16_f32_{kind}_t{trans_b}",
               "float* acc, const unsigned* a, unsigned long long desc_b", body)


#: wgmma operand kinds without the imm-scale-a / imm-scale-b operands (PTX ISA: the integer kinds).
_NO_SCALE_KINDS = ("s8", "u8")


def _statement(name: str, text: str) -> tuple[str, str]:
    return _fn(name, "", _asm(text, memory=True))


def wgmma_fence(mark: str = "") -> tuple[str, str]:
    return _statement("ptx_wgmma_fence", _marked("wgmma.fence.sync.aligned;", mark))


def wgmma_commit(mark: str = "") -> tuple[str, str]:
    return _statement("ptx_wgmma_commit", _marked("wgmma.commit_group.sync.aligned;", mark))


def wgmma_wait(pending: int, mark: str = "") -> tuple[str, str]:
    return _statement(f"ptx_wgmma_wait_{pending}", _marked(f"wgmma.wait_group.sync.aligned {pending};", mark))


def pin_registers(count: int, word: str = "f32") -> tuple[str, str]:
    """An empty ``asm`` that claims to read and write ``count`` registers (float, or int for
    ``word="i32"``): the compiler then keeps them untouched across it (the accumulators that
    wgmma writes asynchronously)."""
    constraint, ctype = ("r", "int") if word == "i32" else ("f", "float")
    # A loop nvcc unrolls: each statement names one register by a constant index again.
    loop = f"    #pragma unroll\n    for (int i = 0; i < {count}; ++i)\n    " + _asm("", [f'"+{constraint}"(r[i])'], memory=True)
    return _fn(f"ptx_pin_{word}_{count}", f"{ctype}* r", loop)


# -- copies and their ordering ----------------------------------------------------------------------
def fence_proxy_async() -> tuple[str, str]:
    """Make this unit's ordinary shared-memory writes visible to the async proxy (wgmma, TMA)."""
    return _statement("ptx_fence_proxy_async", "fence.proxy.async.shared::cta;")


def cp_async(cache: str, nbytes: int, zfill: bool, src_space: str = "") -> tuple[str, str]:
    """``cp.async.{cache}.shared.global`` of ``nbytes`` from ``src`` to the shared address ``dst``;
    with ``zfill`` only ``src_bytes`` are read and the rest of the ``nbytes`` are zeroed.
    ``src_space``: the address-space qualifier of the source pointer (OpenCL's ``__global``)."""
    name = f"ptx_cp_async_{cache}_{nbytes}{'_zfill' if zfill else ''}"
    src = f"const {src_space + ' ' if src_space else ''}void* src"
    if zfill:
        return _fn(name, f"unsigned dst, {src}, int src_bytes",
                   _asm(f"cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;",
                        ins=['"r"(dst)', '"l"(src)', '"r"(src_bytes)'], memory=True))
    return _fn(name, f"unsigned dst, {src}",
               _asm(f"cp.async.{cache}.shared.global [%0], [%1], {nbytes};", ins=['"r"(dst)', '"l"(src)'],
                    memory=True))


def cp_async_commit() -> tuple[str, str]:
    return _statement("ptx_cp_async_commit", "cp.async.commit_group;")


def cp_async_wait(pending: int) -> tuple[str, str]:
    return _statement(f"ptx_cp_async_wait_{pending}", f"cp.async.wait_group {pending};")


def cp_async_wait_all() -> tuple[str, str]:
    return _statement("ptx_cp_async_wait_all", "cp.async.wait_all;")


def st_shared_v4() -> tuple[str, str]:
    """One 16-byte store of four 32-bit registers to the shared address ``addr``."""
    return _fn("ptx_st_shared_v4", "unsigned addr, unsigned a, unsigned b, unsigned c, unsigned d",
               _asm("st.shared.v4.b32 [%0], {%1, %2, %3, %4};",
                    ins=['"r"(addr)', '"r"(a)', '"r"(b)', '"r"(c)', '"r"(d)'], memory=True))


def ld_stream_f4() -> tuple[str, str]:
    """A 16-byte read-only global load that does not allocate in L1 (data read once)."""
    return _fn("ptx_ld_stream_f4", "const float* p",
               "    float4 v;\n" + _asm("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];",
                                     ['"=f"(v.x)', '"=f"(v.y)', '"=f"(v.z)', '"=f"(v.w)'], ['"l"(p)'],
                                     volatile=False) + "\n    return v;",
               ret="float4")


# -- mbarriers, the bulk tensor copy engine (TMA) and register reallocation (sm_90) ---------------
def mbarrier_init() -> tuple[str, str]:
    """Initialize the shared-memory mbarrier at ``bar`` to expect ``count`` arrivals per phase."""
    return _fn("ptx_mbarrier_init", "unsigned bar, unsigned count",
               _asm("mbarrier.init.shared::cta.b64 [%0], %1;", ins=['"r"(bar)', '"r"(count)'], memory=True))


def fence_mbarrier_init() -> tuple[str, str]:
    """Make mbarrier initializations visible to the async proxy (TMA completes on them)."""
    return _statement("ptx_fence_mbarrier_init", "fence.mbarrier_init.release.cluster;")


def mbarrier_arrive() -> tuple[str, str]:
    """One arrival on the mbarrier at ``bar`` (its state token is not kept)."""
    return _fn("ptx_mbarrier_arrive", "unsigned bar",
               _asm("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];", ins=['"r"(bar)'], memory=True))


def mbarrier_arrive_expect_tx() -> tuple[str, str]:
    """One arrival on ``bar`` that also raises the bytes its current phase waits for by ``bytes``
    (the TMA copies that complete on it count them down)."""
    return _fn("ptx_mbarrier_arrive_expect_tx", "unsigned bar, unsigned bytes",
               _asm("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;",
                    ins=['"r"(bar)', '"r"(bytes)'], memory=True))


def cp_async_mbarrier_arrive() -> tuple[str, str]:
    """One arrival on the mbarrier at ``bar`` made when every ``cp.async`` this thread issued
    before has completed (``.noinc``: the barrier's expected count includes it), so a thread that
    issues copies need not wait for them."""
    return _fn("ptx_cp_async_mbarrier_arrive", "unsigned bar",
               _asm("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];", ins=['"r"(bar)'], memory=True))


def mbarrier_wait() -> tuple[str, str]:
    """Spin until the phase of ``bar`` with parity ``parity`` has completed. ``try_wait`` suspends
    the thread for a while in hardware before it fails, so the loop is not a busy spin; a C loop
    rather than a PTX branch, so the helper can be inlined any number of times (PTX labels in
    inline asm would repeat)."""
    return _fn("ptx_mbarrier_wait", "unsigned bar, unsigned parity",
               "    unsigned done;\n    do {\n"
               + _asm("{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
                      "selp.u32 %0, 1, 0, p;\n}\n", ['"=r"(done)'], ['"r"(bar)', '"r"(parity)'], memory=True)
               + "\n    } while (!done);")


# -- clusters (sm_90): cubes launched together on neighbouring multiprocessors ---------------------
def cluster_rank() -> tuple[str, str]:
    """This cube's rank in its cluster (``%cluster_ctarank``)."""
    return _fn("ptx_cluster_rank", "",
               "    unsigned r;\n" + _asm("mov.u32 %0, %%cluster_ctarank;", ['"=r"(r)']) + "\n    return r;",
               ret="unsigned")


def mbarrier_arrive_remote() -> tuple[str, str]:
    """One arrival on the mbarrier at this cube's shared address ``bar`` in the cube of rank ``rank``
    of the cluster (``mapa`` maps the address). The arrival keeps the default (release at CTA
    scope), as CUTLASS's cluster barrier does: ``.release.cluster`` made the 2-cube clusters of the
    Hopper kernel 2.2x slower on the H100 (4096^3 bf16: 393 us against 183 a call), and what it
    would order is done already (the arriving warpgroup has waited for its wgmma reads)."""
    return _fn("ptx_mbarrier_arrive_remote", "unsigned bar, unsigned rank",
               _asm("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                    "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n", ins=['"r"(bar)', '"r"(rank)'],
                    memory=True))


def cluster_sync() -> tuple[str, str]:
    """Every unit of every cube of the cluster meets here (``barrier.cluster`` arrive, then wait):
    what each wrote before is visible to all after, mbarrier initializations included."""
    return _statement("ptx_cluster_sync", "barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;")


def named_barrier() -> tuple[str, str]:
    """``bar.sync id, count``: the ``count`` units (a multiple of 32) that reach barrier ``id``
    wait for each other; the rest of the cube goes on."""
    return _fn("ptx_named_barrier", "unsigned id, unsigned count",
               _asm("bar.sync %0, %1;", ins=['"r"(id)', '"r"(count)'], memory=True))


def setmaxnreg(increase: bool, count: int) -> tuple[str, str]:
    """Set this warpgroup's registers per unit to ``count`` (``setmaxnreg.inc`` / ``.dec``, sm_90a):
    a load-only warpgroup gives registers back for the compute warpgroups to take."""
    verb = "inc" if increase else "dec"
    return _statement(f"ptx_setmaxnreg_{verb}_{count}", f"setmaxnreg.{verb}.sync.aligned.u32 {count};")


# -- flags and partial sums between cubes (batch/split_tail.py) ------------------------------------
def _v4(word: str) -> tuple[str, str, str]:
    """(C type, asm constraint, PTX type) of a 32-bit accumulator word (f32 or i32)."""
    return {"f32": ("float", "f", "f32"), "i32": ("int", "r", "s32")}[word]


def st_global_v4(word: str) -> tuple[str, str]:
    """Four 32-bit ``word`` registers to 16 global bytes at ``p`` (``st.global.v4``)."""
    ctype, c, t = _v4(word)
    return _fn(f"ptx_st_global_v4_{word}", f"void* p, {ctype} a, {ctype} b, {ctype} c, {ctype} d",
               _asm(f"st.global.v4.{t} [%0], {{%1, %2, %3, %4}};",
                    ins=['"l"(p)', *(f'"{c}"({x})' for x in "abcd")], memory=True))


def ld_global_cg_v4(word: str) -> tuple[str, str]:
    """16 global bytes at ``p`` into four ``word`` variables, from L2 (``__ldcg``: another cube
    wrote them during this kernel, so no line of this multiprocessor's L1 may answer). A compiler
    intrinsic, not ``asm volatile``: the compiler then issues a unit's loads back to back before
    their additions (volatile statements, each followed by its additions, waited a full L2
    round trip apiece), and still not above the barriers before them (``asm`` with a memory clobber)."""
    ctype, _, _ = _v4(word)
    vector = {"float": "float4", "int": "int4"}[ctype]
    return _fn(f"cuda_ld_cg_v4_{word}", f"const void* p, {ctype}& a, {ctype}& b, {ctype}& c, {ctype}& d",
               f"    const {vector} v = __ldcg((const {vector}*)p);\n    a = v.x; b = v.y; c = v.z; d = v.w;")


def flag_release() -> tuple[str, str]:
    """Set the global flag at ``p`` to 1 with release semantics at GPU scope: whatever this cube's
    units wrote before meeting this unit at a barrier is visible to a unit that acquires the flag."""
    return _fn("ptx_flag_release", "unsigned* p",
               _asm("st.release.gpu.global.u32 [%0], %1;", ins=['"l"(p)', '"r"(1u)'], memory=True))


def flag_acquire_clear() -> tuple[str, str]:
    """Spin until the global flag at ``p`` is set (acquire at GPU scope), then clear it for the
    next kernel (only this unit reads it)."""
    return _fn("ptx_flag_acquire_clear", "unsigned* p",
               "    unsigned v;\n    do {\n"
               + _asm("ld.acquire.gpu.global.u32 %0, [%1];", ['"=r"(v)'], ['"l"(p)'], memory=True)
               + "\n    } while (v == 0u);\n"
               + _asm("st.relaxed.gpu.global.u32 [%0], %1;", ins=['"l"(p)', '"r"(0u)'], memory=True))
