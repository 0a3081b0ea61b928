"""The shared mutations: seeded, TOML written back as it reads, and npz damages that stay
readable by a careful reader (or refused by it)."""

from __future__ import annotations

import tomllib

import numpy as np

from codesign.fuzz.mutators import dump_toml, mutate_npz_array, mutate_npz_member, mutate_tree, write_arrays


def test_tree_mutations_are_seeded() -> None:
    tree = {"a": [1, 2], "b": {"c": "x"}}
    first = mutate_tree(tomllib.loads(dump_toml(tree)), np.random.default_rng(3))
    assert first == mutate_tree({"a": [1, 2], "b": {"c": "x"}}, np.random.default_rng(3))


def test_toml_written_back_reads_back() -> None:
    tree = {"name": "s", "n": 3, "f": 1.5, "ok": True, "l": [1, "2KiB"], "t": {"x": {"min": 1, "max": 2}},
            "w": [{"model": "mlp"}, {"model": "digits", "weight": 2}]}
    assert tomllib.loads(dump_toml(tree)) == tree


def test_npz_mutations_are_seeded_and_change_the_file() -> None:
    base = write_arrays({"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    for mutate in (mutate_npz_array, mutate_npz_member):
        outs = {mutate(base, np.random.default_rng(seed)) for seed in range(8)}
        assert mutate(base, np.random.default_rng(5)) == mutate(base, np.random.default_rng(5))
        assert len(outs) > 1 and base not in outs
