"""`codesign sweep SPACE.toml --store FILE.db`: explore a design space, every point judged with
schedules chosen for its hardware, each outcome kept in the store (resumable)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from codesign.cli.output import emit
from codesign.sweep.space import packaged_spaces
from codesign.sweep.strategy import DEFAULT_STRATEGY, STRATEGIES, Known
from hw.config import AcceleratorConfig
from hw.errors import InputError

if TYPE_CHECKING:  # the sweep's machinery is imported when it runs, not when the CLI starts
    from codesign.sweep.engine import SweepSummary


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="explore a design space of accelerators with their schedules")
    p.add_argument("space", metavar="SPACE.toml",
                   help=f"a design space file, or a packaged one ({', '.join(packaged_spaces())})")
    p.add_argument("--store", required=True, metavar="FILE.db", help="the sweep's SQLite store")
    p.add_argument("--strategy", choices=tuple(STRATEGIES), default=DEFAULT_STRATEGY,
                   help=f"search strategy (default {DEFAULT_STRATEGY}, the best that `codesign bench "
                        "sweep-search` measured)")
    p.add_argument("--budget", type=int, help="points to evaluate in all (default: every feasible point)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="evaluating processes (default the core count; 0: in this one, no time limit)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one point may take (default 600)")
    p.add_argument("--executor", default="local", metavar="local|dask|dask://HOST:PORT",
                   help="where points run: local processes (default), a Dask LocalCluster of --workers "
                        "processes on 127.0.0.1, or a running `dask scheduler` at HOST:PORT")
    p.add_argument("--security", metavar="FILE.toml",
                   help="Dask TLS options for dask://HOST:PORT (tls_ca_file, tls_client_cert, "
                        "tls_client_key, require_encryption, ...): the connection is then tls://")
    p.add_argument("--resume", action="store_true", help="continue the sweep the store holds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--confirm", type=int, default=0, metavar="N",
                   help="run the N best designs of the front on fsim (exact?) and the RTL (cycles as timed?)")
    p.add_argument("--confirm-timeout", type=float, default=3600.0, metavar="S",
                   help="seconds one design's confirmation may take, Verilator build included (default 3600)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from codesign.exec.progress import Bar
    from codesign.sweep import pipeline
    from codesign.sweep.engine import check_options, run_sweep
    from codesign.sweep.executor import check_reachable, check_workers, parse_executor
    from codesign.sweep.finalists import confirm_best
    from codesign.sweep.space import load_space, resolve_space_path
    from codesign.sweep.store import SweepStore

    check_options(args.budget, args.workers, args.timeout, None)
    if args.confirm < 0:
        raise InputError(f"--confirm must be 0 or more, not {args.confirm}")
    if args.confirm_timeout <= 0:
        raise InputError(f"--confirm-timeout must be positive, not {args.confirm_timeout:g}")
    executor = parse_executor(args.executor, args.security)
    check_workers(executor, args.workers)
    check_reachable(executor)  # before the workloads are prepared, which takes a while
    space = load_space(resolve_space_path(args.space))
    # The store is checked (made when new) before the workloads are prepared, which takes a while.
    SweepStore.open(args.store, space, strategy=args.strategy, seed=args.seed, resume=args.resume).close()
    needs_area = space.constraints.max_area_mm2 is not None or "area_mm2" in space.metrics
    area = pipeline.make_area() if needs_area else None
    if area is not None and space.constraints.max_area_mm2 is not None:
        space = space.with_area(area)
    evaluate = pipeline.make_evaluate(space)
    bar = None if args.json else Bar()
    progress = None if bar is None else (lambda done, total, note: bar.update("sweep", done, total, note))
    summary = run_sweep(space, args.store, evaluate, strategy=args.strategy, budget=args.budget,
                        workers=args.workers, timeout_s=args.timeout, resume=args.resume, seed=args.seed,
                        progress=progress, known=_known_area(area, space.metrics),
                        proxy=pipeline.make_proxy(evaluate, space), executor=executor)
    confirmed = []
    if args.confirm:
        confirmed = confirm_best(args.store, space.metrics, evaluate.confirm, args.confirm,
                                 timeout_s=args.confirm_timeout)
    emit(_report(summary, confirmed, args.json), args.json)
    return 0 if summary.by_status["ok"] and all(c["ok"] for c in confirmed) else 1


def _known_area(area: Callable[[AcceleratorConfig], float] | None, metrics: tuple[str, ...]) -> Known | None:
    """The area model's area, known exactly before a point runs (the evaluation's area_mm2 is
    the same model's), so a model-guided strategy need not predict it."""
    if area is None or "area_mm2" not in metrics:
        return None
    return lambda cfg: {"area_mm2": area(cfg)}


_CONFIRMED = ("point_id", "workload", "ok", "fsim_exact", "rtl_exact", "timing_cycles", "rtl_cycles", "error")


def _report(summary: SweepSummary, confirmed: list[dict[str, Any]], as_json: bool) -> dict[str, Any]:
    data = summary.to_json()
    if confirmed:
        data["confirmed"] = confirmed
    if as_json:
        return data
    lines = {k: v for k, v in data.items() if k not in ("pareto", "failures", "objectives")}
    lines["failures"] = ", ".join(f"{k} {v}" for k, v in data["failures"].items())
    lines["objectives"] = ", ".join(data["objectives"])
    lines["pareto_points"] = len(data["pareto"])
    for i, p in enumerate(data["pareto"]):
        lines[f"pareto[{i}]"] = " ".join(f"{k}={_short(v)}" for k, v in p.items())
    for i, c in enumerate(confirmed):
        lines[f"confirmed[{i}]"] = " ".join(f"{k}={c[k]}" for k in _CONFIRMED if c.get(k) is not None)
    return lines


def _short(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)
