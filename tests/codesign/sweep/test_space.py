import dataclasses
import json
import subprocess
import sys

import pytest

from codesign.sweep.space import (
    Point,
    SpaceError,
    load_space,
    packaged_spaces,
    point_id,
    resolve_space_path,
    space_from_text,
    sram_bytes,
)
from hw.config import PRESETS, AcceleratorConfig

WORKLOAD = '\n[[workloads]]\nmodel = "resnet18"\n'


def space(text, tmp_path, **kw):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return load_space(path, **kw)


def test_a_space_enumerates_its_product_in_order_the_last_dimension_fastest(tmp_path):
    s = space('base = "tiny"\n[params]\nblock_out = [4, 8]\nbatch = { min = 1, max = 2 }\n' + WORKLOAD,
              tmp_path)
    assert [d.name for d in s.dimensions] == ["batch", "block_out"]  # the canonical order, not the file's
    assert s.size == 4
    assert [(p.config.batch, p.config.block_out) for p in s] == [(1, 4), (1, 8), (2, 4), (2, 8)]
    assert len(s) == 4 and all(p.config.block_in == 4 for p in s)
    assert s.workloads[0].name == "resnet18" and s.workloads[0].weight == 1.0


def test_sizes_ranges_dram_clock_and_workload_fields(tmp_path):
    s = space('clock_mhz = 250\nobjectives = ["latency", "edp"]\nlayer_objective = "energy"\n'
              'batch_policy = "raise"\n[dram]\nlatency_cycles = 100\nbytes_per_cycle = 16\n'
              '[params]\ninp_bytes = { min = "8KiB", max = "32KiB" }\nwgt_bytes = ["1MiB", 65536]\n'
              '[[workloads]]\nname = "r"\nmodel = "resnet18"\nweight = 2.5\n'
              'input_shapes = { input = [1, 3, 112, 112] }\n', tmp_path)
    assert s.dimensions[0].values == (8192, 16384, 32768)
    assert s.dimensions[1].values == (1 << 20, 65536)
    assert (s.base.dram_latency_cycles, s.base.dram_bytes_per_cycle, s.base.clock_mhz) == (100, 16, 250.0)
    assert s.objectives == ("latency", "edp") and s.metrics == ("latency_cycles", "edp")
    assert (s.layer_objective, s.batch_policy) == ("energy", "raise")
    assert s.workloads[0].weight == 2.5 and s.workloads[0].shapes() == {"input": (1, 3, 112, 112)}


def test_point_ids_are_stable_across_processes_and_ignore_only_the_name():
    cfg = PRESETS["vta"]
    code = ("from hw.config import PRESETS; from codesign.sweep.space import point_id; "
            "print(point_id(PRESETS['vta']))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == point_id(cfg) and len(point_id(cfg)) == 16
    assert Point(cfg).id == Point(dataclasses.replace(cfg, name="other")).id
    assert Point(cfg).id != Point(dataclasses.replace(cfg, dram_latency_cycles=65)).id
    assert Point(cfg).id == Point(dataclasses.replace(cfg, clock_mhz=100)).id  # 100 == 100.0
    canonical = {k: v for k, v in cfg.to_dict().items() if k != "name"}
    import hashlib
    assert point_id(cfg) == hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":"))
                                           .encode()).hexdigest()[:16]


def test_jointly_invalid_combinations_and_constraints_are_counted_not_refused(tmp_path):
    # batch 2 x block_in 16 needs 32-byte inp tiles; 16-byte scratchpads fit only batch 1 x block_in 16.
    s = space('[params]\nbatch = [1, 2]\ninp_bytes = [16, 32]\n' + WORKLOAD, tmp_path)
    assert s.census() == {"combinations": 4, "invalid": 1, "sram": 0, "macs": 0, "area": 0, "feasible": 3}
    assert s.point_at(2) is None and len(s) == 3
    # tiny: SRAM = 7 KiB + wgt_bytes; MACs per cycle = 4 x block_out. The SRAM rule is checked first.
    s = space('base = "tiny"\n[params]\nblock_out = [4, 8, 16]\nwgt_bytes = ["4KiB", "8KiB"]\n'
              '[constraints]\nmin_macs_per_cycle = 32\nmax_sram_bytes = "12KiB"\n' + WORKLOAD, tmp_path)
    assert s.census() == {"combinations": 6, "invalid": 0, "sram": 3, "macs": 1, "area": 0, "feasible": 2}
    assert [(p.config.block_out, p.config.wgt_bytes) for p in s] == [(8, 4096), (16, 4096)]
    assert s.violation(s.point_at(0)) == "16 MACs per cycle is below min_macs_per_cycle 32"
    assert s.violation(s.point_at(1)) == "15360 bytes of SRAM is over max_sram_bytes 12288"
    assert sram_bytes(s.point_at(1).config) == 15 * 1024


def test_the_area_constraint_uses_the_model_it_is_given(tmp_path):
    text = 'base = "tiny"\n[params]\nblock_out = [8, 16, 32]\n[constraints]\nmax_area_mm2 = 2.0\n' + WORKLOAD
    s = space(text, tmp_path, area_mm2=lambda cfg: cfg.block_out / 8)
    assert [p.config.block_out for p in s] == [8, 16] and s.census()["area"] == 1
    assert s.violation(s.point_at(2)) == "4 mm2 is over max_area_mm2 2"
    with pytest.raises(SpaceError, match="the space has max_area_mm2 but no area model was given"):
        len(space(text, tmp_path))


def test_sampling_is_seeded_and_without_replacement(tmp_path):
    s = space('[params]\nblock_in = [8, 16, 32]\nblock_out = [8, 16, 32]\n' + WORKLOAD, tmp_path)
    a, b = s.sample(5, seed=1), s.sample(5, seed=1)
    assert [p.id for p in a] == [p.id for p in b] and len({p.id for p in a}) == 5
    assert {p.id for p in s.sample(100, seed=2)} == {p.id for p in s}
    assert [p.id for p in s.sample(5, seed=3)] != [p.id for p in a]


def test_coordinates_round_trip(tmp_path):
    s = space('[params]\nblock_in = [8, 16, 32]\nblock_out = [8, 16]\n' + WORKLOAD, tmp_path)
    for p in s:
        assert s.point_with(s.coordinates(p)) == p


def test_a_model_file_is_relative_to_the_space(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"x")
    s = space('[[workloads]]\nmodel = "m.onnx"\n', tmp_path)
    assert s.workloads[0].model == str((tmp_path / "m.onnx").resolve()) and s.workloads[0].name == "m"
    assert s.size == 1 and [p.config for p in s] == [PRESETS["vta"]]


def test_the_digest_follows_what_decides_points_not_comments(tmp_path):
    a = space('[params]\nbatch = [1, 2]\n' + WORKLOAD, tmp_path)
    b = space('# a comment\n[params]\nbatch = [1, 2]  # two\n' + WORKLOAD, tmp_path)
    c = space('[params]\nbatch = [1, 4]\n' + WORKLOAD, tmp_path)
    assert a.digest == b.digest != c.digest


def test_packaged_spaces():
    assert packaged_spaces() == ["realistic", "small"]
    small = load_space(resolve_space_path("small"))
    assert 200 <= len(small) <= 400 and [w.model for w in small.workloads] == ["resnet18"]
    realistic = load_space(resolve_space_path("realistic"))
    assert realistic.size >= 10_000 and [(w.model, w.weight) for w in realistic.workloads] == [
        ("resnet18", 3.0), ("bert-tiny", 1.0)]
    with pytest.raises(SpaceError, match=r"space 'nope' is neither a file nor a packaged space \(realistic"):
        resolve_space_path("nope")


BAD = [
    ("[params\n", r"s.toml: not valid TOML: .*line 1"),
    ('colour = "red"\n' + WORKLOAD, r"s.toml: colour: unknown key \(known: name, base"),
    ('[params]\nwidth = [1]\n' + WORKLOAD, r"params.width: unknown parameter \(one of batch, block_in"),
    ('[params]\ninp_bits = [8]\n' + WORKLOAD, r"params.inp_bits: not a parameter a space may vary"),
    ('[params]\nbatch = [1, 3]\n' + WORKLOAD,
     r"params.batch: 3 is not valid: batch must be a power of two, not 3"),
    ('[params]\nbus_bits = [32]\n' + WORKLOAD,
     r"params.bus_bits: 32 is not valid: bus_bits must be in \[64, 512\]"),
    ('[params]\nbatch = []\n' + WORKLOAD, r"params.batch: empty list; give at least one value"),
    ('[params]\nbatch = [1, 1]\n' + WORKLOAD, r"params.batch: a value is listed twice in \[1, 1\]"),
    ('[params]\nbatch = 1.5\n' + WORKLOAD, r"params.batch: 1.5 is not an integer$"),
    ('[params]\ninp_bytes = ["32KB"]\n' + WORKLOAD, r"params.inp_bytes: '32KB' is not a size"),
    ('[params]\nblock_in = { min = 8, max = 24 }\n' + WORKLOAD,
     r"params.block_in: range bounds must be powers of two, not 24"),
    ('[params]\nblock_in = { min = 32, max = 8 }\n' + WORKLOAD,
     r"params.block_in: range min 32 is above max 8"),
    ('[params]\nblock_in = { min = 8, step = 2 }\n' + WORKLOAD,
     r"params.block_in: a range has exactly the keys min and max, not min, step"),
    ('objectives = ["latency", "speed"]\n' + WORKLOAD,
     r"objectives: unknown objective 'speed' \(one of latency, area, energy, edp\)"),
    ('objectives = []\n' + WORKLOAD, r"objectives: must be a non-empty list"),
    ('objectives = ["area", "area"]\n' + WORKLOAD, r"objectives: each objective may be named once"),
    ('layer_objective = "power"\n' + WORKLOAD,
     r"layer_objective: must be one of cycles, energy, edp, not 'power'"),
    ('batch_policy = "drop"\n' + WORKLOAD, r"batch_policy: must be one of pad, raise, not 'drop'"),
    ('base = "huge"\n' + WORKLOAD, r"base: unknown preset 'huge'; known presets: rect, tiny, vta"),
    ('clock_mhz = "fast"\n' + WORKLOAD, r"clock_mhz: must be a number, not 'fast'"),
    ('clock_mhz = -5\n' + WORKLOAD, r"dram/clock_mhz: clock_mhz must be positive, not -5.0"),
    ('[dram]\nlatency_cycles = 0\n' + WORKLOAD,
     r"dram/clock_mhz: dram_latency_cycles must be in \[1, 100000\]"),
    ('[dram]\nwidth = 3\n' + WORKLOAD, r"dram.width: unknown key \(known: latency_cycles, bytes_per_cycle\)"),
    ('[constraints]\nmax_area_mm2 = 0\n' + WORKLOAD,
     r"constraints.max_area_mm2: must be a positive number, not 0"),
    ('[constraints]\nmax_sram_bytes = 0\n' + WORKLOAD,
     r"constraints.max_sram_bytes: must be at least 1, not 0"),
    ('[constraints]\nmin_macs_per_cycle = 64\nmax_macs_per_cycle = 32\n' + WORKLOAD,
     r"constraints: min_macs_per_cycle 64 is above max_macs_per_cycle 32"),
    ('[constraints]\npower_w = 3\n' + WORKLOAD, r"constraints.power_w: unknown key"),
    ('name = "x"\n', r"workloads: give at least one \[\[workloads\]\] table"),
    ('[[workloads]]\nname = "x"\n', r"workloads\[0\].model: missing; give a zoo model or an ONNX file"),
    ('[[workloads]]\nmodel = "resnet99"\n',
     r"workloads\[0\].model: 'resnet99' is neither a zoo model \(bert-tiny, .*resnet18\) nor a file \(.*9\)"),
    ('[[workloads]]\nmodel = "resnet18"\nweight = 0\n',
     r"workloads\[0\].weight: must be a positive finite number, not 0"),
    ('[[workloads]]\nmodel = "resnet18"\nweight = "heavy"\n',
     r"workloads\[0\].weight: must be a positive finite"),
    ('[[workloads]]\nmodel = "resnet18"\ninput_shapes = { input = [1, 0] }\n',
     r"workloads\[0\].input_shapes.input: must be a list of positive integers, not \[1, 0\]"),
    ('[[workloads]]\nmodel = "resnet18"\nseq = 3\n', r"workloads\[0\].seq: unknown key"),
    (WORKLOAD + WORKLOAD, r"workloads: the name 'resnet18' is used twice"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_a_bad_space_is_refused_in_one_line_naming_the_key(tmp_path, text, message):
    with pytest.raises(SpaceError, match=message) as info:
        space(text, tmp_path)
    assert "\n" not in str(info.value) and str(info.value).startswith(str(tmp_path / "s.toml"))


def test_an_unreadable_space_file(tmp_path):
    with pytest.raises(SpaceError, match=r"missing.toml: cannot read the space \(No such file or directory"):
        load_space(tmp_path / "missing.toml")


def test_space_from_text_needs_no_file(tmp_path):
    s = space_from_text('[params]\nbatch = [1, 2]\n' + WORKLOAD, path=tmp_path / "virtual.toml")
    assert s.size == 2 and s.path.endswith("virtual.toml")
    assert isinstance(s.base, AcceleratorConfig)
