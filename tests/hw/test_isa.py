import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hw import isa
from hw.config import PRESETS, AcceleratorConfig, ConfigError

VTA = PRESETS["vta"]

# Bit ranges (high, low) of VTA's hw_spec.h for the default config (apache/tvm-vta, include/vta/hw_spec.h).
GOLDEN = {
    "mem": {"opcode": (2, 0), "pop_prev": (3, 3), "pop_next": (4, 4), "push_prev": (5, 5),
            "push_next": (6, 6), "memory_type": (9, 7), "sram_base": (25, 10),
            "dram_base": (57, 26), "y_size": (79, 64), "x_size": (95, 80),
            "x_stride": (111, 96), "y_pad_0": (115, 112), "y_pad_1": (119, 116),
            "x_pad_0": (123, 120), "x_pad_1": (127, 124)},
    "gemm": {"opcode": (2, 0), "pop_prev": (3, 3), "pop_next": (4, 4), "push_prev": (5, 5),
             "push_next": (6, 6), "reset": (7, 7), "uop_bgn": (20, 8), "uop_end": (34, 21),
             "iter_out": (48, 35), "iter_in": (62, 49), "dst_factor_out": (74, 64),
             "dst_factor_in": (85, 75), "src_factor_out": (96, 86), "src_factor_in": (107, 97),
             "wgt_factor_out": (117, 108), "wgt_factor_in": (127, 118)},
    "alu": {"opcode": (2, 0), "pop_prev": (3, 3), "pop_next": (4, 4), "push_prev": (5, 5),
            "push_next": (6, 6), "reset": (7, 7), "uop_bgn": (20, 8), "uop_end": (34, 21),
            "iter_out": (48, 35), "iter_in": (62, 49), "dst_factor_out": (74, 64),
            "dst_factor_in": (85, 75), "src_factor_out": (96, 86), "src_factor_in": (107, 97),
            "alu_opcode": (110, 108), "use_imm": (111, 111), "imm": (127, 112)},
    "uop": {"dst": (10, 0), "src": (21, 11), "wgt": (31, 22)},
}


@pytest.mark.parametrize("kind", sorted(GOLDEN))
def test_vta_bit_positions_equal_hw_spec(kind):
    layout = isa.layouts(VTA)[kind]
    got = {f.name: (f.offset + f.width - 1, f.offset) for f in layout.fields}
    assert got == GOLDEN[kind]


def test_opcodes_and_enums_match_vta():
    assert [isa.Opcode[n] for n in ("LOAD", "STORE", "GEMM", "FINISH", "ALU")] == [0, 1, 2, 3, 4]
    assert [isa.MemType[n] for n in ("UOP", "WGT", "INP", "ACC", "OUT", "ACC_8BIT")] == [
        0, 1, 2, 3, 4, 5]
    assert [isa.AluOp[n] for n in ("MIN", "MAX", "ADD", "SHR", "MUL")] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("kind", "field"), [(k, f) for k in GOLDEN for f in GOLDEN[k]])
def test_each_vta_field_lands_on_its_bits(kind, field):
    """Encode an instruction with only `field` at its maximum: exactly its bits are set."""
    high, low = GOLDEN[kind][field]
    width = high - low + 1
    if kind == "uop":
        words = isa.encode_uops([isa.Uop(**{"dst": 0, field: (1 << width) - 1})], VTA)
        assert int(words[0]) == ((1 << width) - 1) << low
        return
    cls = {"mem": isa.Load, "gemm": isa.Gemm, "alu": isa.Alu}[kind]
    if field == "opcode":
        return  # fixed by the class; covered by test_opcodes_and_enums_match_vta
    value: object = -1 if field == "imm" else (1 << width) - 1
    if field in ("memory_type", "alu_opcode"):
        value = {"memory_type": isa.MemType.OUT, "alu_opcode": isa.AluOp.MUL}[field]
    elif width == 1:
        value = True
    base = cls(**{f.name: 0 for f in dataclasses.fields(cls) if f.type in ("int", int)})
    base = dataclasses.replace(base, **({"memory_type": isa.MemType.UOP} if kind == "mem" else {}))
    if kind == "alu":
        base = dataclasses.replace(base, alu_opcode=isa.AluOp.MIN)
    word = isa.encode_insn(dataclasses.replace(base, **{field: value}), VTA)
    zero = isa.encode_insn(base, VTA)
    mask = ((1 << width) - 1) << low
    assert (word ^ zero) & ~mask == 0
    assert (word >> low) & ((1 << width) - 1) == int(value) & ((1 << width) - 1)


def test_encode_rejects_values_that_do_not_fit():
    with pytest.raises(isa.EncodingError, match=r"LOAD field sram_base=65536 does not fit its "
                                                  r"16-bit field \(allowed 0..65535\)"):
        isa.encode_insn(isa.Load(sram_base=1 << 16), VTA)
    with pytest.raises(isa.EncodingError, match=r"ALU field imm=32768 does not fit its 16-bit field"):
        isa.encode_insn(isa.Alu(imm=1 << 15), VTA)
    with pytest.raises(isa.EncodingError, match="GEMM field uop_bgn=8192 does not fit its 13-bit"):
        isa.encode_insn(isa.Gemm(uop_bgn=8192), VTA)
    with pytest.raises(isa.EncodingError, match="GEMM field iter_out=-1 does not fit"):
        isa.encode_insn(isa.Gemm(iter_out=-1), VTA)
    with pytest.raises(isa.EncodingError, match=r"micro-op 1 field wgt=1024 does not fit its 10-bit"):
        isa.encode_uops([isa.Uop(0), isa.Uop(0, 0, 1024)], VTA)


def test_decode_rejects_unknown_opcodes_and_enums():
    with pytest.raises(isa.EncodingError, match="unknown opcode 7"):
        isa.decode_insn(7, VTA)
    bad_mem = isa.encode_insn(isa.Load(), VTA) | (7 << 7)
    with pytest.raises(isa.EncodingError, match="Load has unknown memory_type 7"):
        isa.decode_insn(bad_mem, VTA)
    bad_alu = isa.encode_insn(isa.Alu(), VTA) | (7 << 108)
    with pytest.raises(isa.EncodingError, match="Alu has unknown alu_opcode 7"):
        isa.decode_insn(bad_alu, VTA)


def test_a_decoder_decodes_each_word_once_and_refuses_a_bad_one_every_time():
    """`isa.decoder` shares one immutable record per word (a model's Programs repeat words)."""
    decode = isa.decoder(VTA)
    word = isa.encode_insn(isa.Gemm(iter_out=3, uop_end=2), VTA)
    assert decode(word) is decode(word) == isa.Gemm(iter_out=3, uop_end=2)
    assert decode(word) is isa.decode_insn(word, VTA)
    assert isa.decoder(PRESETS["tiny"])(isa.encode_insn(isa.Gemm(iter_out=3, uop_end=2), PRESETS["tiny"])) \
        is not decode(word)  # one table per config
    for _ in range(2):
        with pytest.raises(isa.EncodingError, match="unknown opcode 7"):
            decode(7)


def test_routing_and_tokens():
    assert isa.module_of(isa.Load(memory_type=isa.MemType.INP)) == isa.Module.LOAD
    assert isa.module_of(isa.Load(memory_type=isa.MemType.WGT)) == isa.Module.LOAD
    assert isa.module_of(isa.Load(memory_type=isa.MemType.UOP)) == isa.Module.COMPUTE
    assert isa.module_of(isa.Load(memory_type=isa.MemType.ACC)) == isa.Module.COMPUTE
    assert isa.module_of(isa.Load(memory_type=isa.MemType.ACC_8BIT)) == isa.Module.COMPUTE
    assert isa.module_of(isa.Store()) == isa.Module.STORE
    assert isa.module_of(isa.Finish()) == isa.Module.COMPUTE
    Q = isa.Queue
    assert isa.token_queues(isa.Gemm(pop_prev=True, pop_next=True, push_prev=True, push_next=True)) \
        == ([Q.LOAD_TO_COMPUTE, Q.STORE_TO_COMPUTE], [Q.COMPUTE_TO_LOAD, Q.COMPUTE_TO_STORE])
    assert isa.token_queues(isa.Load(pop_next=True, push_next=True)) == (
        [Q.COMPUTE_TO_LOAD], [Q.LOAD_TO_COMPUTE])
    assert isa.token_queues(isa.Store(pop_prev=True, push_prev=True)) == (
        [Q.COMPUTE_TO_STORE], [Q.STORE_TO_COMPUTE])
    with pytest.raises(isa.EncodingError, match="LOAD on the load module sets pop_prev, but no "
                                                  "module comes before load"):
        isa.token_queues(isa.Load(pop_prev=True))
    with pytest.raises(isa.EncodingError, match="STORE on the store module sets push_next, but "
                                                  "no module comes after store"):
        isa.token_queues(isa.Store(push_next=True))


def test_format_insn():
    text = isa.format_insn(isa.Load(memory_type=isa.MemType.WGT, sram_base=3, dram_base=9,
                                    y_size=2, x_size=4, x_stride=8, y_pad_0=1, push_next=True))
    assert text == "LOAD WGT sram=3 dram=9 y=2 x=4 stride=8 pad=(1,0,0,0)  [push_next]"
    assert isa.format_insn(isa.Load(memory_type=isa.MemType.UOP, x_size=0)) == "NOP-COMPUTE"
    assert isa.format_insn(isa.Alu(alu_opcode=isa.AluOp.SHR, use_imm=True, imm=-3)).startswith(
        "ALU SHR imm=-3")
    assert isa.format_insn(isa.Finish(pop_next=True)) == "FINISH  [pop_next]"


def test_acc_8bit_is_memory_type_5_in_vta_bits_9_7():
    """The only change for ACC_8BIT is a value of memory_type: every other bit stays."""
    fields = dict(sram_base=5, dram_base=77, y_size=2, x_size=3, x_stride=9, y_pad_0=1, x_pad_1=2,
                  pop_prev=True, push_next=True)
    acc8 = isa.encode_insn(isa.Load(memory_type=isa.MemType.ACC_8BIT, **fields), VTA)
    acc = isa.encode_insn(isa.Load(memory_type=isa.MemType.ACC, **fields), VTA)
    assert (acc8 >> 7) & 0b111 == 5 and acc8 ^ acc == (5 ^ 3) << 7
    assert isa.decode_insn(acc8, VTA) == isa.Load(memory_type=isa.MemType.ACC_8BIT, **fields)
    Q = isa.Queue
    assert isa.token_queues(isa.decode_insn(acc8, VTA)) == ([Q.LOAD_TO_COMPUTE],
                                                             [Q.COMPUTE_TO_STORE])
    assert isa.format_insn(isa.Load(memory_type=isa.MemType.ACC_8BIT, sram_base=4, dram_base=2,
                                    y_size=1, x_size=8, x_stride=8, x_pad_0=1)) == (
        "LOAD ACC_8BIT sram=4 dram=2 y=1 x=8 stride=8 pad=(0,0,1,0)")
    with pytest.raises(isa.EncodingError, match="Load has unknown memory_type 6"):
        isa.decode_insn(isa.encode_insn(isa.Load(), VTA) | (6 << 7), VTA)


def test_padding_covers_every_bit():
    for layout in isa.layouts(VTA).values():
        assert sum(width for _, width in layout.with_padding()) == layout.bits
    assert ("_pad58", 6) in isa.layouts(VTA)["mem"].with_padding()


# -- property tests: decode(encode(x)) == x on random valid configs --------------------------------

@st.composite
def configs(draw) -> AcceleratorConfig:
    while True:
        try:
            return AcceleratorConfig(
                batch=1 << draw(st.integers(0, 2)), block_in=1 << draw(st.integers(1, 5)),
                block_out=1 << draw(st.integers(1, 5)),
                uop_bytes=1 << draw(st.integers(8, 15)), inp_bytes=1 << draw(st.integers(10, 17)),
                wgt_bytes=1 << draw(st.integers(12, 19)), acc_bytes=1 << draw(st.integers(11, 17)),
                bus_bits=1 << draw(st.integers(6, 9)),
            )
        except ConfigError:
            continue


def _field(draw, layout: isa.Layout, name: str) -> int:
    f = layout[name]
    return draw(st.integers(f.low, f.high))


@st.composite
def insns(draw, cfg: AcceleratorConfig) -> isa.Insn:
    cls = draw(st.sampled_from([isa.Load, isa.Store, isa.Gemm, isa.Alu, isa.Finish]))
    layout = isa.layouts(cfg)[cls.layout_key]
    kwargs: dict[str, object] = {}
    for f in dataclasses.fields(cls):
        if f.name == "memory_type":
            kwargs[f.name] = draw(st.sampled_from(list(isa.MemType)))
        elif f.name == "alu_opcode":
            kwargs[f.name] = draw(st.sampled_from(list(isa.AluOp)))
        elif layout[f.name].width == 1:
            kwargs[f.name] = draw(st.booleans())
        else:
            kwargs[f.name] = _field(draw, layout, f.name)
    return cls(**kwargs)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_decode_encode_round_trip(data):
    cfg = data.draw(configs())
    batch = [data.draw(insns(cfg)) for _ in range(8)]
    words = isa.encode(batch, cfg)
    assert words.dtype == np.uint64 and words.shape == (8, 2)
    assert isa.decode(words, cfg) == batch


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_uop_round_trip(data):
    cfg = data.draw(configs())
    lay = isa.layouts(cfg)["uop"]
    uops = [isa.Uop(*(data.draw(st.integers(0, lay[n].high)) for n in ("dst", "src", "wgt")))
            for _ in range(5)]
    words = isa.encode_uops(uops, cfg)
    fields = isa.decode_uops(words, cfg)
    columns = zip(fields["dst"], fields["src"], fields["wgt"], strict=True)
    assert [isa.Uop(d, s, w) for d, s, w in columns] == uops


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_decoded_records_are_the_constructors_field_for_field(data):
    """decode_insn builds records without the dataclass __init__: the same fields, in the same
    order, of the same types (bool flags, enum members, ints) as the constructor's."""
    cfg = data.draw(configs())
    insn = data.draw(insns(cfg))
    got = isa.decode_insn(isa.encode_insn(insn, cfg), cfg)
    assert type(got) is type(insn)
    assert [(k, type(v), v) for k, v in vars(got).items()] == \
        [(k, type(v), v) for k, v in vars(insn).items()]
    assert got == insn and hash(got) == hash(insn)
    assert isa.decoder(cfg)(isa.encode_insn(insn, cfg)) == insn
