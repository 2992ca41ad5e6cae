"""Every capability is defined in compose/capabilities.py (the levels' base.py files only re-export
the names they used to define, so old imports keep working)."""
from __future__ import annotations

import re
from pathlib import Path

import gemm_engine
from gemm_engine.compose import capabilities
from gemm_engine.compose.contracts import Capability

PACKAGE = Path(gemm_engine.__file__).parent


def test_capabilities_are_defined_in_one_module():
    defined = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
               if re.search(r"\bCapability\(", path.read_text())}
    assert defined == {"compose/capabilities.py"}, defined


def test_old_import_paths_give_the_same_objects():
    from gemm_engine.global_ import base as global_base
    from gemm_engine.stage import base as stage_base
    from gemm_engine.tile import base as tile_base

    for module, names in ((tile_base, ("UNIT_SCOPE", "PLANE_SCOPE", "WARPGROUP_SCOPE")),
                          (stage_base, ("SMEM_STAGE", "REGISTER_LHS_STAGE", "CARRIED_FRAGMENTS",
                                        "ASYNC_DESCRIPTOR_STAGE")),
                          (global_base, ("TASK_LOADER", "CHUNK_LOADER", "K_MAJOR_SMEM", "SHARED_RING"))):
        for name in names:
            assert getattr(module, name) is getattr(capabilities, name), (module.__name__, name)


def test_every_capability_has_distinct_words():
    caps = [v for v in vars(capabilities).values() if isinstance(v, Capability)]
    assert caps
    assert len({c.name for c in caps}) == len(caps) and len({c.meaning for c in caps}) == len(caps)
