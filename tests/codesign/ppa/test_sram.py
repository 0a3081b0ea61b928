import itertools

import pytest

from codesign.ppa.sram import sram_cost
from codesign.ppa.table import PpaError

KB = 1024


def test_golden_accelergy_ert_point():
    # energy_area.md §2.3/§7: Accelergy's ERT for a 45 nm 128 KB x 64 b SRAM (CACTI 7).
    cost = sram_cost(128 * KB, 64)
    assert cost.read_pj == pytest.approx(32.2859, rel=1e-6)
    assert cost.write_pj == pytest.approx(26.065, rel=1e-6)
    assert cost.area_mm2 == pytest.approx(0.429589, rel=1e-6)


def test_table_points_are_returned_exactly():
    cost = sram_cost(32 * KB, 128)
    assert (cost.read_pj, cost.write_pj) == pytest.approx((20.31, 27.53))
    assert sram_cost(1 << 20, 512).area_mm2 == pytest.approx(3.9530)


def test_interpolation_lies_between_neighbours():
    cost = sram_cost(48 * KB, 64)
    assert 17.04 < cost.read_pj < 25.87
    assert 0.0949 < cost.area_mm2 < 0.2090
    mid = sram_cost(32 * KB, 181)  # between the 128- and 256-bit columns
    assert 20.31 < mid.read_pj < 26.84


@pytest.mark.parametrize("width", [8, 32, 64, 96, 128, 200, 256, 512, 1024, 2048, 4096])
def test_monotone_in_capacity(width):
    caps = [int(256 * 2 ** (k / 2)) for k in range(30)]  # 256 B .. 8 MB in sqrt(2) steps
    costs = [sram_cost(c, width) for c in caps]
    for small, big in itertools.pairwise(costs):
        assert big.read_pj > small.read_pj
        assert big.write_pj > small.write_pj
        assert big.area_mm2 > small.area_mm2
        # CACTI prints leakage to 4 decimals: 2 KB and 4 KB both read 0.0001 mW.
        assert big.leak_mw >= small.leak_mw * (1 - 1e-9)


def test_narrow_rows_use_accelergys_rule():
    # 32 KB x 32 b = the 64 KB x 64 b array of the same depth, area x 1/2, energy x (0.7/2 + 0.3).
    cost = sram_cost(32 * KB, 32)
    assert cost.area_mm2 == pytest.approx(0.2090 / 2)
    assert cost.read_pj == pytest.approx(25.87 * 0.65)
    assert cost.write_pj == pytest.approx(19.65 * 0.65)


def test_wide_rows_are_side_by_side_512_bit_arrays():
    cost = sram_cost(256 * KB, 1024)  # two 128 KB x 512 b arrays
    assert cost.read_pj == pytest.approx(2 * 97.77)
    assert cost.write_pj == pytest.approx(2 * 198.38)
    assert cost.area_mm2 == pytest.approx(2 * 0.3913)


def test_small_capacity_follows_the_depth_rule():
    half = sram_cost(512, 64)
    assert half.read_pj == pytest.approx(1.67 * 0.5 ** 0.78)
    assert half.area_mm2 == pytest.approx(0.0036 / 2)


def test_node_scaling():
    cost = sram_cost(128 * KB, 64, node_nm=32)
    assert cost.area_mm2 == pytest.approx(0.429589 * 0.46)
    assert cost.read_pj == pytest.approx(32.2859 * 0.66)
    # CACTI's own 32 nm run (18.1554 pJ, 0.21728 mm²) is within 20% of the scaled 45 nm point.
    assert cost.read_pj == pytest.approx(18.1554, rel=0.2)
    assert cost.area_mm2 == pytest.approx(0.21728, rel=0.2)


def test_bad_sizes_and_node():
    with pytest.raises(PpaError, match=r"^an SRAM needs a positive capacity and width, "
                                       r"not 0 bytes x 64 bits$"):
        sram_cost(0, 64)
    with pytest.raises(PpaError, match=r"^unknown node 10 nm; choices: "):
        sram_cost(KB, 64, node_nm=10)
