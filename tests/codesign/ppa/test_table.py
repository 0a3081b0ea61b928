import re

import pytest

from codesign.ppa.table import TABLE, PpaError, constant, dram_kinds, dram_pj_per_bit, node_scale, nodes
from hw.errors import InputError


def test_every_row_names_its_source_unit_and_node():
    names = [row.name for row in TABLE]
    assert len(names) == len(set(names))
    for row in TABLE:
        assert row.source.strip(), row.name
        assert re.search(r"§\d|Nangate|CACTI|Horowitz|Stillmaker", row.source), row.name
        assert row.unit, row.name
        assert row.value > 0, row.name
        # Only off-chip DRAM and the SRAM table's scaling rules are node-free.
        assert row.node_nm is not None or row.name.startswith(("dram.", "sram.depth", "sram.narrow",
                                                              "sram.max")), row.name
        assert row.node_nm is None or row.node_nm in nodes(), row.name


def test_wb45_profile_values():
    # energy_area.md §7, typed from the note.
    assert constant("e_mac") == pytest.approx(constant("e_mul8") + constant("e_add32")) == 0.3
    assert constant("a_ge") == 0.798
    assert constant("a_ff") == 4.522
    assert constant("dram.lpddr4") == 8.0
    assert dram_pj_per_bit("lpddr4") == 8.0
    assert dram_pj_per_bit("ddr3") == 70.0
    assert set(dram_kinds()) >= {"lpddr4", "ddr3", "hbm2", "gddr5"}


def test_node_scaling_factors_from_45nm():
    assert node_scale(45) == (1.0, 1.0)
    assert node_scale(32) == (0.46, 0.66)
    assert node_scale(28) == (0.377, 0.513)
    assert node_scale(22) == (0.252, 0.294)
    assert node_scale(16) == (0.19, 0.174)
    assert node_scale(7) == (0.059, 0.094)


def test_unknown_node_names_value_and_choices():
    with pytest.raises(PpaError, match=r"^unknown node 12 nm; choices: 65, 45, 40, 32, 28, 22, 16, 14, 7$"):
        node_scale(12)
    assert issubclass(PpaError, InputError)


def test_unknown_dram_names_value_and_choices():
    with pytest.raises(PpaError, match=r"^unknown DRAM kind 'ddr5'; "
                                       r"choices: lpddr4, lpddr, ddr3, gddr5, hbm2, hmc$"):
        dram_pj_per_bit("ddr5")


def test_unknown_constant():
    with pytest.raises(PpaError, match=r"^unknown constant 'e_nope'$"):
        constant("e_nope")
