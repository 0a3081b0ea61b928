"""Memo: kept until full, then emptied before the next entry; a dict otherwise."""

from __future__ import annotations

from hw.memo import Memo


def test_a_full_memo_is_emptied_before_the_next_entry() -> None:
    memo: Memo[int, str] = Memo(3)
    assert [memo.keep(k, str(k)) for k in range(3)] == ["0", "1", "2"]
    assert dict(memo) == {0: "0", 1: "1", 2: "2"} and memo.get(1) == "1" and 5 not in memo
    assert memo.keep(3, "3") == "3"
    assert dict(memo) == {3: "3"}  # emptied, then kept
    memo.keep(3, "three")  # a key kept again takes the place of its old value (no room needed)
    assert len(memo) == 1 and memo[3] == "three"
