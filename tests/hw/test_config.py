import dataclasses
import json

import pytest

from hw import isa
from hw.config import PRESETS, AcceleratorConfig, ConfigError, parse_override, preset, resolve


def test_vta_preset_matches_published_vta():
    cfg = PRESETS["vta"]
    assert (cfg.batch, cfg.block_in, cfg.block_out) == (1, 16, 16)
    assert (cfg.inp_bits, cfg.wgt_bits, cfg.acc_bits) == (8, 8, 32)
    assert (cfg.uop_bytes, cfg.inp_bytes, cfg.wgt_bytes, cfg.acc_bytes) == (
        32 << 10, 32 << 10, 256 << 10, 128 << 10)
    # Depths and index widths from VTA's hw_spec_const.h (apache/tvm-vta, config/vta_config.json).
    assert (cfg.uop_depth, cfg.inp_depth, cfg.wgt_depth, cfg.acc_depth, cfg.out_depth) == (
        8192, 2048, 1024, 2048, 2048)
    assert (cfg.uop_index_bits, cfg.inp_index_bits, cfg.wgt_index_bits, cfg.acc_index_bits) == (
        13, 11, 10, 11)
    assert (cfg.inp_elem_bytes, cfg.wgt_elem_bytes, cfg.acc_elem_bytes, cfg.out_elem_bytes) == (
        16, 256, 64, 16)
    assert cfg.macs_per_cycle == 256 and cfg.bus_bits == 64 and cfg.dram_latency_cycles == 64
    assert cfg.out_bytes == 32 << 10 and cfg.uop_elem_bits == 32


def test_rect_is_non_square():
    cfg = PRESETS["rect"]
    assert (cfg.batch, cfg.block_in, cfg.block_out, cfg.bus_bits) == (2, 8, 16, 128)
    assert cfg.inp_elem_bytes == 16 and cfg.wgt_elem_bytes == 128 and cfg.acc_elem_bytes == 128


def test_acc_8bit_elements_are_out_sized_and_land_in_acc(preset_cfg):
    cfg = preset_cfg
    assert cfg.elem_bytes(isa.MemType.ACC_8BIT) == cfg.acc_8bit_elem_bytes == cfg.out_elem_bytes
    assert cfg.acc_8bit_elem_bytes == cfg.batch * cfg.block_out * cfg.inp_bits // 8
    assert cfg.depth(isa.MemType.ACC_8BIT) == cfg.acc_depth
    assert cfg.max_elem_bytes == max(cfg.acc_elem_bytes, cfg.wgt_elem_bytes, cfg.inp_elem_bytes,
                                     cfg.uop_elem_bytes)
    assert cfg.derived()["acc_8bit_elem_bytes"] == cfg.out_elem_bytes


def test_preset_fingerprints_are_unchanged():
    """Fingerprints key every cache and every saved Program: derived values do not enter them."""
    got = {name: cfg.fingerprint() for name, cfg in PRESETS.items()}
    assert got == {"vta": "fb693d7d2e59f157", "tiny": "c1a1370746bbec81", "rect": "ef813a5ea413725a"}


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["vta"].batch = 2  # type: ignore[misc]


def test_fingerprint_is_stable_and_ignores_sim_only_fields():
    cfg = PRESETS["vta"]
    assert cfg.fingerprint() == AcceleratorConfig(name="vta").fingerprint()
    assert len(cfg.fingerprint()) == 16
    same_hw = dataclasses.replace(cfg, name="x", dram_latency_cycles=5, clock_mhz=300.0)
    assert same_hw.fingerprint() == cfg.fingerprint()
    assert dataclasses.replace(cfg, block_out=32).fingerprint() != cfg.fingerprint()


def test_json_round_trip(tmp_path, preset_cfg):
    path = tmp_path / "cfg.json"
    preset_cfg.save(path)
    assert AcceleratorConfig.load(path) == preset_cfg
    assert json.loads(path.read_text())["batch"] == preset_cfg.batch


def test_wide_uop_word_when_fields_exceed_32_bits():
    # A small uop buffer leaves room in the instructions for 13-bit inp and wgt indices.
    cfg = dataclasses.replace(PRESETS["vta"], uop_bytes=1024, inp_bytes=1 << 17, wgt_bytes=1 << 21)
    assert cfg.uop_fields_bits == 11 + 13 + 13
    assert cfg.uop_elem_bits == 64 and cfg.uop_depth == 128


@pytest.mark.parametrize(("changes", "message"), [
    ({"batch": 3}, "batch must be a power of two, not 3"),
    ({"block_in": 0}, "block_in must be a power of two, not 0"),
    ({"inp_bytes": 3000}, "inp_bytes must be a power of two, not 3000"),
    ({"bus_bits": 32}, r"bus_bits must be in \[64, 512\], not 32"),
    ({"bus_bits": 1024}, r"bus_bits must be in \[64, 512\], not 1024"),
    ({"inp_bits": 4}, r"inp_bits must be in \[8, 16\], not 4"),
    ({"acc_bits": 16, "inp_bits": 16}, "acc_bits must be at least inp_bits \\+ wgt_bits = 24"),
    ({"wgt_bytes": 128}, "wgt_bytes=128 is too small to hold one wgt tile of 256 bytes"),
    ({"acc_bytes": 32}, "acc_bytes=32 is too small to hold one acc tile of 64 bytes"),
    ({"uop_bytes": 2}, "uop_bytes=2 is too small to hold one 4-byte micro-op"),
    ({"inp_bytes": 1 << 21}, "gives 131072 elements, more than the 16-bit sram_base field"),
    ({"uop_bytes": 1 << 16}, "ISA field would overflow: GEMM fields need 148 bits, more than 128, "
                             "as no field may straddle a 64-bit word"),
    ({"mem_inflight": 0}, r"mem_inflight must be in \[1, 64\], not 0"),
    ({"clock_mhz": 0.0}, "clock_mhz must be positive, not 0.0"),
    ({"dram_latency_cycles": 0}, r"dram_latency_cycles must be in \[1, 100000\], not 0"),
])
def test_invalid_values_name_field_value_and_rule(changes, message):
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(PRESETS["vta"], **changes)


def test_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="batch must be .*int.*not str '2'"):
        AcceleratorConfig(batch="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not bool"):
        AcceleratorConfig(block_in=True)


def test_unknown_preset_and_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown preset 'nope'; known presets: rect, tiny, vta"):
        preset("nope")
    with pytest.raises(ConfigError, match="'nope.json' is neither a preset"):
        resolve("nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        resolve(str(bad))
    bad.write_text('{"batch": 1, "colour": 3}')
    with pytest.raises(ConfigError, match="unknown parameter\\(s\\) colour"):
        resolve(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        resolve(str(bad))


def test_overrides():
    assert resolve("tiny", ["batch=2", "clock_mhz=250"]).batch == 2
    assert parse_override("inp_bytes=0x400") == ("inp_bytes", 1024)
    with pytest.raises(ConfigError, match="must have the form key=value"):
        parse_override("batch")
    with pytest.raises(ConfigError, match="unknown parameter 'bogus'"):
        parse_override("bogus=1")
    with pytest.raises(ConfigError, match="batch needs a number, not 'two'"):
        parse_override("batch=two")


def test_config_show_json_loads_back(tmp_path):
    """The file `codesign config show --json` prints is a config file: its derived values are
    checked against the parameters, not trusted."""
    cfg = preset("tiny").with_params(batch=2)
    path = tmp_path / "shown.json"
    path.write_text(json.dumps({**cfg.to_dict(), **cfg.derived(), "fingerprint": cfg.fingerprint()}))
    assert resolve(str(path)) == cfg
    path.write_text(json.dumps({**cfg.to_dict(), "inp_depth": cfg.inp_depth * 2}))
    with pytest.raises(ConfigError, match=rf"shown.json: derived value inp_depth={cfg.inp_depth * 2} "
                                          rf"disagrees with the parameters, which give {cfg.inp_depth}"):
        resolve(str(path))

@pytest.mark.parametrize("value", [float("inf"), float("nan"), float("-inf")])
def test_non_finite_clock_is_refused(value):
    with pytest.raises(ConfigError, match=rf"^clock_mhz must be finite, not {value}$"):
        PRESETS["tiny"].with_params(clock_mhz=value)
