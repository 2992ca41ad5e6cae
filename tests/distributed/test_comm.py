"""distributed/comm.py: timeout parsing, the group's ranks (refused before init), engines per device,
bounded waits, and the CPU `Side` in a one-rank gloo group."""
from __future__ import annotations

import datetime

import pytest

torch = pytest.importorskip("torch")

from gemm_engine.distributed import comm  # noqa: E402
from single_gloo import gloo_world_of_one  # noqa: E402,F401


@pytest.mark.parametrize("value, expected", [(5, 5.0), (0.25, 0.25), (datetime.timedelta(minutes=2), 120.0)])
def test_seconds_accepts_positive_numbers_and_timedeltas(value, expected):
    assert comm.seconds(value) == expected and isinstance(comm.seconds(value), float)


@pytest.mark.parametrize("bad", [0, -1, True, "5", None])
def test_seconds_refuses_others_naming_timeout(bad):
    with pytest.raises(ValueError, match="timeout"):
        comm.seconds(bad)


def test_group_ranks_refused_before_init():
    if torch.distributed.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        comm.group_ranks(None)


def test_engine_for_returns_given_engine():
    marker = object()
    assert comm.engine_for(torch.device("cuda", 3), marker) is marker


class _Late:
    def wait(self, timeout):
        raise RuntimeError(f"waited {timeout}")


def test_wait_turns_runtime_error_into_timeout_naming_what():
    with pytest.raises(TimeoutError, match=r"block 2 did not arrive within 1.5 s"):
        comm.wait([_Late()], 1.5, "block 2")


def test_one_rank_group(gloo_world_of_one):
    assert comm.group_ranks(None) == (0, 1)
    side = comm.Side(torch.device("cpu"), None, 5.0, "test")
    assert side.cuda is False
    assert side.exchange(None, 0, None, 0, "nothing") is None
    assert side.ready(None) is None
    side.before_send()
    side.finish()


def test_group_ranks_kept_per_group_and_asked_afresh_for_a_new_one(gloo_world_of_one, monkeypatch):
    """A group's ranks are asked of torch.distributed once and kept (its lookups cost host time each
    call); a default group made after the last one is asked afresh, and none is answered once the
    default group is gone."""
    dist = torch.distributed
    asked = []
    real = dist.get_rank
    monkeypatch.setattr(dist, "get_rank", lambda group=None: asked.append(group) or real(group))
    first = dist.group.WORLD
    assert comm.group_ranks(None) == comm.group_ranks(first) == comm.group_ranks(None) == (0, 1)
    assert asked == [first]
    dist.destroy_process_group()
    try:
        with pytest.raises(RuntimeError, match="init_process_group"):
            comm.group_ranks(first)         # a kept group is not answered once the process group is gone
    finally:
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    second = dist.group.WORLD
    assert second is not first and comm.group_ranks(None) == (0, 1) and asked == [first, second]


def test_group_ranks_refuses_a_group_this_rank_is_not_in(gloo_world_of_one):
    with pytest.raises(ValueError, match="not a member"):
        comm.group_ranks(torch.distributed.GroupMember.NON_GROUP_MEMBER)
