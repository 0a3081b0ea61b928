import os
import signal

from codesign.report.build import build_report
from codesign.sweep.engine import pareto_front, run_sweep
from codesign.sweep.finalists import best, confirm_best
from codesign.sweep.store import SweepStore

from .conftest import fake_evaluate


def fake_confirm(point, swept):
    cycles = int(swept.metrics["latency_cycles"])
    return [{"point_id": point.id, "workload": "mlp", "fsim_exact": True, "rtl_exact": True,
             "timing_cycles": cycles, "rtl_cycles": cycles, "ok": True}]


def test_the_best_designs_of_the_front_are_confirmed_and_kept(tmp_path, tiny_space):
    store = tmp_path / "s.db"
    run_sweep(tiny_space, store, fake_evaluate, strategy="grid", workers=0)
    with SweepStore.read(store) as db:
        front = sorted(pareto_front(db, tiny_space.metrics), key=lambda p: p.metrics["latency_cycles"])
        chosen = best(db, tiny_space.metrics, 2)
    assert [p.id for p, _ in chosen] == [p.id for p in front[:2]]
    rows = confirm_best(store, tiny_space.metrics, fake_confirm, 2, timeout_s=30)
    assert [r["point_id"] for r in rows] == [p.id for p in front[:2]] and all(r["ok"] for r in rows)
    with SweepStore.read(store) as db:
        kept = db.confirmations()
    assert set(kept) == {p.id for p in front[:2]}
    assert kept[front[0].id][0]["rtl_cycles"] == rows[0]["rtl_cycles"]
    # the report's table says so
    build_report(store, tmp_path / "r", top=3)
    page = (tmp_path / "r" / "report.md").read_text()
    assert page.count("outputs exact; RTL = timing") == 2 and page.count("not run") == 1


def crash_on_first(point, swept):
    if swept.metrics["latency_cycles"] == min_latency[0]:
        os.kill(os.getpid(), signal.SIGSEGV)
    return fake_confirm(point, swept)


min_latency = [0.0]


def test_a_confirmation_that_crashes_is_recorded_as_failed_and_the_others_run(tmp_path, tiny_space):
    store = tmp_path / "s.db"
    run_sweep(tiny_space, store, fake_evaluate, strategy="grid", workers=0)
    with SweepStore.read(store) as db:
        min_latency[0] = min(p.metrics["latency_cycles"] for p in pareto_front(db, tiny_space.metrics))
    rows = confirm_best(store, tiny_space.metrics, crash_on_first, 2, timeout_s=30)
    assert [r["ok"] for r in rows] == [False, True]
    assert rows[0]["status"] == "crash" and rows[0]["workload"] == "*"
    build_report(store, tmp_path / "r", top=2)
    assert "FAILED (crash:" in (tmp_path / "r" / "report.md").read_text()
