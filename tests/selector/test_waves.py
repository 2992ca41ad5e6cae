"""selector/waves.py: waves of tiles, bytes, intensity and which products stream a big operand."""
from __future__ import annotations

from gemm_engine.selector.waves import (STREAM_MAX_ROWS, STREAM_MIN_BYTES, big_operand_bytes, intensity, moved_bytes,
                                        short_side, streams_weights, wave_fill, waves)
from renders import any_problem


def test_waves_and_fill():
    assert (waves(288, 132), waves(264, 132), waves(0, 132)) == (3, 2, 0)
    assert wave_fill(264, 132) == 1.0 and abs(wave_fill(288, 132) - 288 / 396) < 1e-12 and wave_fill(0, 132) == 0.0


def test_bytes_and_intensity():
    p = any_problem((1, 16, 4096, 4096), "bfloat16", ("row", "col"))
    assert big_operand_bytes(p) == 4096 * 4096 * 2 and short_side(p) == 16
    assert big_operand_bytes(any_problem((256, 128, 128, 128), "bfloat16")) == 128 * 128 * 2     # one entry
    assert moved_bytes(p) == (16 * 4096 + 4096 * 4096 + 16 * 4096) * 2
    assert 15 < intensity(p) < 16          # about M flop a byte of weight
    square = any_problem((1, 4096, 4096, 4096), "bfloat16")
    assert intensity(square) > 1000


def test_streaming_products():
    assert streams_weights(any_problem((1, 16, 4096, 4096), "bfloat16"))
    assert streams_weights(any_problem((1, 4096, STREAM_MAX_ROWS, 4096), "bfloat16"))
    assert not streams_weights(any_problem((1, STREAM_MAX_ROWS + 1, 4096, 4096), "bfloat16"))
    assert not streams_weights(any_problem((1, 16, 1024, 1024), "bfloat16"))            # 2 MiB
    edge = any_problem((1, 8, 2048, STREAM_MIN_BYTES // 4096), "bfloat16")
    assert big_operand_bytes(edge) == STREAM_MIN_BYTES and streams_weights(edge)
