import pytest

from codesign.ppa.energy import energy_model
from codesign.ppa.table import PpaError
from hw.config import AcceleratorConfig
from sim.backend import Stats

# Every buffer lands on a CACTI table point (energy_area.md §2.3, 45 nm) or the narrow rule:
# uop 4 KB x 32 b (= the 8 KB x 64 b array, x 0.65), inp 8 KB x 64, wgt 64 KB x 512,
# acc 32 KB x 256, out 8 KB x 64, command queues 64 x 128 b = 1 KB x 128.
CFG = AcceleratorConfig(batch=1, block_in=8, block_out=8, uop_bytes=4096, inp_bytes=8192,
                        wgt_bytes=65536, acc_bytes=32768, cmd_queue_depth=64, clock_mhz=100.0)
STATS = Stats(cycles=1000, gemm_uops=10, alu_uops=4, inp_load_bytes=64, wgt_load_bytes=128,
              acc_load_bytes=64, uop_load_bytes=16, out_store_bytes=24, load_insns=3,
              compute_insns=4, store_insns=1)

# (read pJ, write pJ) per row access, and leakage mW, typed from the note.
UOP = (6.14 * 0.65, 7.88 * 0.65)
INP, WGT, ACC, OUT, QUEUES = (6.14, 7.88), (76.73, 126.63), (26.84, 51.79), (6.14, 7.88), (3.38, 5.11)
LEAK_MW = 0.0003 / 2 + 0.0003 + 0.0017 + 0.0009 + 0.0003 + 0.00005


def expected_pj() -> dict[str, float]:
    gemm, alu, acc_writes = 10, 4, 10 + 4 + 64 // 32
    return {
        "mac": gemm * 64 * 0.3,
        "alu": alu * 8 * 0.1,
        "uop": (gemm + alu) * UOP[0] + 16 / 4 * UOP[1],
        "inp": gemm * INP[0] + 64 / 8 * INP[1],
        "wgt": gemm * WGT[0] + 128 / 64 * WGT[1],
        "acc": (gemm + 2 * alu) * ACC[0] + acc_writes * ACC[1],
        "out": acc_writes * OUT[1] + 24 / 8 * OUT[0],
        "queues": 8 * (QUEUES[0] + QUEUES[1]),
        "dram": ((64 + 128 + 64 + 16 + 24) * 8 + 8 * 128) * 8.0,
        "leakage": LEAK_MW * 1e-3 * (1000 / 100e6) * 1e12,
    }


def test_energy_of_a_hand_built_run_equals_the_documented_sum():
    estimate = energy_model(STATS, CFG)
    want = expected_pj()
    assert estimate.components == pytest.approx(want, rel=1e-9)
    assert estimate.total_pj == pytest.approx(sum(want.values()), rel=1e-9)
    assert estimate.leakage_pj == pytest.approx(34.0, rel=1e-9)
    assert estimate.seconds == pytest.approx(1e-5)
    assert estimate.edp_js == pytest.approx(sum(want.values()) * 1e-12 * 1e-5)


def test_stats_dict_gives_the_same_estimate():
    assert energy_model(STATS.to_dict(), CFG) == energy_model(STATS, CFG)
    assert energy_model(STATS, CFG).to_json()["total_pj"] == energy_model(STATS, CFG).total_pj


def test_node_scales_on_chip_energy_not_dram():
    at45, at32 = energy_model(STATS, CFG), energy_model(STATS, CFG, node_nm=32)
    for name, pj in at45.components.items():
        assert at32.components[name] == pytest.approx(pj * (1.0 if name == "dram" else 0.66))


def test_dram_kind_changes_only_dram_energy():
    lp4, ddr3 = energy_model(STATS, CFG), energy_model(STATS, CFG, dram="ddr3")
    assert ddr3.components["dram"] == pytest.approx(lp4.components["dram"] * 70 / 8)
    assert {k: v for k, v in ddr3.components.items() if k != "dram"} == \
        {k: v for k, v in lp4.components.items() if k != "dram"}


def test_a_run_without_cycles_has_no_leakage_or_time():
    estimate = energy_model(Stats(gemm_uops=3), CFG)
    assert estimate.seconds is None and estimate.edp_js is None
    assert estimate.leakage_pj == 0.0
    assert estimate.components["mac"] == pytest.approx(3 * 64 * 0.3)


def test_an_empty_run_costs_nothing():
    assert energy_model(Stats(cycles=0), CFG).total_pj == 0.0


def test_bad_node_and_dram():
    with pytest.raises(PpaError, match=r"^unknown node 3 nm; choices: "):
        energy_model(STATS, CFG, node_nm=3)
    with pytest.raises(PpaError, match=r"^unknown DRAM kind 'sram'; choices: lpddr4, "):
        energy_model(STATS, CFG, dram="sram")
