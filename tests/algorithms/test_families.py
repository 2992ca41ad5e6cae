"""The card's family names (algorithms/families.py, family.py): each runs its best member on the
device, every member stays reachable by its own name, the old class names still compose, and a
family whose conditioned member is the only one that runs still runs it."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms import (REGISTRY, AlgorithmFamily, DoubleBufferingAlgorithm, OrderedAlgorithm,
                                    OrderedFamily, OrderedUnitAlgorithm, SimpleAlgorithm, SpecializedAlgorithm,
                                    PlaneSelection, SpecializedFamily, SpecializedUnitAlgorithm, UnitSelection)
from gemm_engine.algorithms.family import rank
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.components import SplitKBatchMatmul
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.selector.rules import Rule
from helpers import assert_close, random
from renders import OPENCL_DEVICE, any_problem

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
OPENCL = dialect_for(OPENCL_DEVICE)


def runs(family: str, problem, dialect) -> str:
    alg = REGISTRY[family]()
    return alg.chosen(alg.setup(problem, dialect)).name


@pytest.mark.parametrize("family, dtype, dialect, member", [
    ("specialized", "float16", SM90, "specialized_wgmma"),      # the Hopper member
    ("specialized", "bfloat16", SM90, "specialized_wgmma"),
    ("specialized", "float32", SM90, "specialized_unit"),       # exact float32: no tensor cores
    ("specialized", "float16", SM80, "specialized_unit"),
    ("specialized", "float16", OPENCL, "specialized_unit"),
    ("double_buffering", "float16", SM90, "pipelined_wgmma"),
    ("double_buffering", "float16", SM80, "pipelined_mma"),
    ("double_buffering", "float64", SM90, "pipelined_dmma"),
    ("double_buffering", "float32", SM90, "double_buffering_unit"),
    ("double_buffering", "float16", OPENCL, "double_buffering_unit"),
    ("simple", "float16", SM80, "simple_mma"),
    ("simple", "float64", SM80, "simple_dmma"),
    ("simple", "float32", SM90, "simple_unit"),
    ("simple", "float64", OPENCL, "simple_unit"),
    ("ordered", "float16", SM90, "ordered_unit"),
    ("ordered", "float32", OPENCL, "ordered_unit"),
])
def test_a_family_name_runs_its_best_member_on_the_device(family, dtype, dialect, member):
    assert runs(family, any_problem((1, 2048, 2048, 2048), dtype), dialect) == member


def test_a_member_whose_condition_says_no_yields_to_the_next():
    # tf32 with a row-major b and M = 512: transposing it for wgmma costs more than pipelined_mma loses.
    small = any_problem((1, 512, 512, 512), "tf32")
    assert runs("double_buffering", small, SM90) == "pipelined_mma"
    _, _, verdicts = DoubleBufferingAlgorithm().resolve_member(small, SM90)
    assert verdicts[0].name == "pipelined_wgmma" and verdicts[0].verdict == "not chosen"
    assert runs("double_buffering", any_problem((1, 2048, 2048, 2048), "tf32"), SM90) == "pipelined_wgmma"


def test_a_declined_member_still_runs_when_no_other_member_can():
    class Picky(AlgorithmFamily):    # not registered: only wgmma runs f16 here, and its rule says no
        name = "picky"
        variants = (REGISTRY["pipelined_wgmma"],)
        member_rules = (Rule("pipelined_wgmma", "test", lambda p, d: "not today"),)

    cfg = Picky().setup(any_problem((1, 256, 256, 256)), SM90)
    assert Picky().chosen(cfg).name == "pipelined_wgmma"
    _, _, verdicts = Picky().resolve_member(any_problem((1, 256, 256, 256)), SM90)
    assert verdicts[0].verdict == "chosen" and "not today" in verdicts[0].reason


def test_a_family_none_of_whose_members_runs_names_each_refusal():
    fp8_blocks = any_problem((1, 256, 256, 256), "float8_e4m3fn", out="bfloat16",
                             epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    with pytest.raises(SetupError, match="no variant can run this problem") as err:
        OrderedFamily().setup(fp8_blocks, SM80)
    assert "ordered_unit: " in str(err.value) and "ordered_unit: ordered_unit:" not in str(err.value)


def test_rank_is_auto_s_walk_and_records_every_entry_when_asked():
    entries = [(Rule("pipelined_wgmma", "w"), REGISTRY["pipelined_wgmma"]()),
               (Rule("simple_unit", "u"), REGISTRY["simple_unit"]())]
    member, cfg, verdicts = rank(entries, any_problem((1, 256, 256, 256)), SM80, "me", "my pick", everything=True)
    assert member.name == "simple_unit" and [v.verdict for v in verdicts] == ["refused", "chosen"]
    assert verdicts[1].reason == "my pick: u"


def test_members_stay_reachable_and_the_old_classes_compose():
    assert SpecializedAlgorithm is SpecializedUnitAlgorithm and OrderedAlgorithm is OrderedUnitAlgorithm
    assert REGISTRY["specialized"] is SpecializedFamily and REGISTRY["ordered"] is OrderedFamily
    assert REGISTRY["specialized_unit"] is SpecializedAlgorithm and REGISTRY["ordered_unit"] is OrderedAlgorithm
    assert not OrderedAlgorithm.is_family and OrderedFamily.is_family

    class OrderedSplitK(OrderedAlgorithm):      # the README's composition: a slot swapped
        name = "ordered_split_k_family_test"
        batch = SplitKBatchMatmul

    alg = OrderedSplitK()
    alg.setup(any_problem((1, 37, 45, 2000), "float32"), OPENCL)
    assert isinstance(alg.components, SplitKBatchMatmul)
    assert isinstance(alg.components.global_, OrderedAlgorithm.global_)


def test_a_whole_selection_goes_to_the_members_of_its_type():
    fam = SimpleAlgorithm(UnitSelection(stage_m=32, stage_n=32, tile_m=2, tile_n=2))
    assert [m.name for m in fam.members] == ["simple_unit"]
    assert runs("simple", any_problem((1, 64, 64, 64), "float16"), SM80) == "simple_mma"
    assert fam.chosen(fam.setup(any_problem((1, 64, 64, 64), "float16"), SM80)).name == "simple_unit"
    with pytest.raises(TypeError, match="no variant takes"):
        SpecializedFamily(not_a_knob=1)
    # A type no member has exactly goes to the members whose type has all its fields: a plain unit
    # tiling to the register member of "specialized" (its selection adds load_units).
    assert [m.name for m in SpecializedFamily(UnitSelection()).members] == ["specialized_unit"]
    # ... but an exact type is preferred: a plane tiling is double_buffering_mma's, not the rings'.
    assert [m.name for m in DoubleBufferingAlgorithm(PlaneSelection()).members] == ["double_buffering_mma"]


def test_family_names_run_on_opencl(opencl_engine, rng):
    a, b = random(rng, (70, 45), "float32"), random(rng, (45, 33), "float32")
    for name, member in (("specialized", "specialized_unit"), ("ordered", "ordered_unit"),
                         ("double_buffering", "double_buffering_unit")):
        assert_close(opencl_engine.matmul(a, b, algorithm=name), a, b, "float32")
        assert opencl_engine.last_choice[0].name == member
    assert np.array_equal(opencl_engine.matmul(a, b, algorithm="specialized"),
                          opencl_engine.matmul(a, b, algorithm="specialized_unit"))
