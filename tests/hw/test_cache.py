"""hw/cache.py: the cache root, entries built once under a lock, atomic single-file writes."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest

from hw import cache
from hw.cache import CACHE_ENV, CacheEntry, IncompleteBuildError, SealedFolder
from hw.errors import WorkbenchError


def test_cache_root_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("CODESIGN_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_root() == tmp_path / ".cache" / "codesign"
    monkeypatch.setenv("CODESIGN_CACHE", str(tmp_path / "c"))
    assert cache.cache_root() == tmp_path / "c"
    monkeypatch.setenv("CODESIGN_CACHE", "")  # empty counts as unset
    assert cache.cache_root() == tmp_path / ".cache" / "codesign"


def _writer(text: str, calls: list[Path]):
    def build(tmp: Path) -> None:
        calls.append(tmp)
        (tmp / "lib.so").write_text(text)
        (tmp / "build.log").write_text("ok\n")

    return build


def test_entry_is_built_once_and_reused(tmp_path):
    entry = CacheEntry(tmp_path / "rtl" / "key", "lib.so")
    calls: list[Path] = []
    assert not entry.is_complete()
    path = entry.get_or_build(_writer("first", calls))
    assert path == tmp_path / "rtl" / "key" / "lib.so" and path.read_text() == "first"
    assert (tmp_path / "rtl" / "key" / "build.log").read_text() == "ok\n"  # the whole directory
    assert entry.get_or_build(_writer("second", calls)) == path
    assert path.read_text() == "first" and len(calls) == 1
    assert calls[0].parent == tmp_path / "rtl" and calls[0].name.startswith(".build-key-")
    assert sorted(p.name for p in (tmp_path / "rtl").iterdir()) == [".key.lock", "key"]
    manifest = json.loads((tmp_path / "rtl" / "key" / cache.MANIFEST).read_text())
    assert manifest == {"key": "key", "marker": "lib.so", "size": 5,
                        "sha256": hashlib.sha256(b"first").hexdigest()}


class Boom(RuntimeError):
    pass


def test_failed_build_leaves_nothing_and_reraises(tmp_path):
    entry = CacheEntry(tmp_path / "timing" / "key", "lib.so")
    seen: list[Path] = []

    def fail(tmp: Path) -> None:
        seen.append(tmp)
        (tmp / "half.o").write_text("half")
        raise Boom("compiler said no")

    with pytest.raises(Boom, match="compiler said no"):
        entry.get_or_build(fail)
    assert not seen[0].exists() and not entry.directory.exists()
    assert [p.name for p in (tmp_path / "timing").iterdir()] == [".key.lock"]
    calls: list[Path] = []
    assert entry.get_or_build(_writer("fixed", calls)).read_text() == "fixed"  # retried later


def test_build_without_its_marker_is_refused(tmp_path):
    entry = CacheEntry(tmp_path / "key", "lib.so")

    def misnamed(tmp: Path) -> None:
        (tmp / "other.so").write_text("x")

    with pytest.raises(IncompleteBuildError, match=r"cache entry .*key finished without writing its "
                       r"marker file lib.so"):
        entry.get_or_build(misnamed)
    assert IncompleteBuildError.__mro__[1] is ValueError
    assert [p.name for p in tmp_path.iterdir()] == [".key.lock"]


@pytest.mark.parametrize("leftover", ["empty", "stale files"])
def test_incomplete_entry_is_rebuilt(tmp_path, leftover):
    entry = CacheEntry(tmp_path / "key", "lib.so")
    entry.directory.mkdir()
    if leftover == "stale files":
        (entry.directory / "obj").mkdir()
        (entry.directory / "build.log").write_text("killed\n")
    calls: list[Path] = []
    assert entry.get_or_build(_writer("new", calls)).read_text() == "new"
    assert len(calls) == 1
    assert sorted(p.name for p in entry.directory.iterdir()) == [cache.MANIFEST, "build.log", "lib.so"]
    assert (entry.directory / "build.log").read_text() == "ok\n"


def _race(root: str, log: str, barrier) -> str:
    """One of two processes building the same key; each build appends a line to `log`."""

    def build(tmp: Path) -> None:
        with open(log, "a") as fh:
            fh.write(f"{tmp.name}\n")
        time.sleep(0.3)  # long enough that the other process is waiting on the lock
        (tmp / "lib.so").write_text("built")

    barrier.wait(timeout=60)
    return str(CacheEntry(Path(root) / "rtl" / "key", "lib.so").get_or_build(build))


def test_concurrent_processes_build_a_key_once(tmp_path):
    context = multiprocessing.get_context("spawn")  # no fork of a threaded pytest worker
    log = tmp_path / "builds.log"
    with context.Manager() as manager, context.Pool(2) as pool:
        barrier = manager.Barrier(2)
        jobs = [pool.apply_async(_race, (str(tmp_path), str(log), barrier)) for _ in range(2)]
        paths = [job.get(timeout=120) for job in jobs]
    assert paths == [str(tmp_path / "rtl" / "key" / "lib.so")] * 2
    assert len(log.read_text().splitlines()) == 1
    assert (tmp_path / "rtl" / "key" / "lib.so").read_text() == "built"
    assert sorted(p.name for p in (tmp_path / "rtl").iterdir()) == [".key.lock", "key"]


def test_write_atomic_replaces_whole_files(tmp_path):
    path = tmp_path / "area" / "key-fast.json"
    cache.write_atomic(path, "{}\n")
    cache.write_atomic(path, '{"lut": 3}\n')
    assert path.read_text() == '{"lut": 3}\n'
    assert [p.name for p in path.parent.iterdir()] == ["key-fast.json"]  # no temporary left


def _damage(entry: CacheEntry, how: str, tmp_path: Path) -> None:
    """Plant a damaged entry: the marker truncated, emptied, or another key's entry moved in."""
    if how == "truncated":
        entry.path.write_bytes(entry.path.read_bytes()[:3])
    elif how == "empty":
        entry.path.write_bytes(b"")
    elif how == "same size":
        entry.path.write_text("FIRST")
    elif how == "foreign":
        other = CacheEntry(tmp_path / "other", "lib.so")
        other.get_or_build(_writer("first", []))  # same bytes, another key
        shutil.rmtree(entry.directory)
        os.rename(other.directory, entry.directory)
    elif how == "no manifest":
        (entry.directory / cache.MANIFEST).unlink()
    os.utime(entry.path, ns=(1, 1))  # a new signature: not remembered as checked


@pytest.mark.parametrize("how", ["truncated", "empty", "same size", "foreign", "no manifest"])
def test_a_damaged_entry_is_detected_and_rebuilt(tmp_path, how):
    entry = CacheEntry(tmp_path / "key", "lib.so")
    entry.get_or_build(_writer("first", []))
    _damage(entry, how, tmp_path)
    assert not entry.is_complete()
    calls: list[Path] = []
    assert entry.get_or_build(_writer("again", calls)).read_text() == "again" and len(calls) == 1
    assert entry.is_complete()


def test_checked_files_reject_damaged_and_foreign_copies(tmp_path):
    path = tmp_path / "verilog" / "k1" / "accel.v"
    cache.write_checked(path, "module accel;\n")
    assert cache.read_checked(path) == "module accel;\n"
    path.write_text("module acc")  # truncated
    assert cache.read_checked(path) is None
    cache.write_checked(path, "module accel;\n")
    foreign = tmp_path / "verilog" / "k2" / "accel.v"
    shutil.copytree(path.parent, foreign.parent)  # another key's file and sidecar
    assert cache.read_checked(foreign) is None
    assert cache.read_checked(tmp_path / "missing.v") is None


def test_an_unwritable_cache_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    entry = CacheEntry(blocker / "rtl" / "key", "lib.so")
    with pytest.raises(cache.CacheError, match=rf"^cache directory {blocker}/rtl cannot be written "
                                               r"\(.*\); set CODESIGN_CACHE to a writable directory$"):
        entry.get_or_build(_writer("x", []))
    with pytest.raises(cache.CacheError, match=rf"^cache directory {blocker}/area cannot be written"):
        cache.write_checked(blocker / "area" / "k.json", "{}")
    assert issubclass(cache.CacheError, WorkbenchError)


def test_two_processes_meeting_a_damaged_entry_rebuild_it_once(tmp_path):
    entry = CacheEntry(tmp_path / "rtl" / "key", "lib.so")
    entry.get_or_build(_writer("stale", []))
    _damage(entry, "truncated", tmp_path)
    context = multiprocessing.get_context("spawn")
    log = tmp_path / "builds.log"
    with context.Manager() as manager, context.Pool(2) as pool:
        barrier = manager.Barrier(2)
        jobs = [pool.apply_async(_race, (str(tmp_path), str(log), barrier)) for _ in range(2)]
        assert [job.get(timeout=120) for job in jobs] == [str(entry.path)] * 2
    assert len(log.read_text().splitlines()) == 1 and entry.path.read_text() == "built"
    assert entry.is_complete()


def _folder() -> SealedFolder:
    return SealedFolder("things", "CODESIGN_TEST_THINGS", b"test-thing\0", ".bin")


@pytest.mark.parametrize("how", ["truncated", "empty", "another key's", "unsealed"])
def test_a_sealed_file_reads_back_only_intact_and_for_its_key(tmp_path, how):
    folder = _folder()
    folder.use(tmp_path)
    folder.write("a", b"data of a")
    folder.write("b", b"data of b")
    assert folder.read("a") == b"data of a" and folder.read("missing") is None
    assert folder.has("a") and not folder.has("missing")
    path = tmp_path / "a.bin"
    damaged = {"truncated": path.read_bytes()[:-1], "empty": b"", "unsealed": b"data of a",
               "another key's": (tmp_path / "b.bin").read_bytes()}
    path.write_bytes(damaged[how])
    assert folder.read("a") is None and not path.exists()  # deleted: rebuilt, never trusted


def test_where_a_sealed_folder_is(tmp_path, monkeypatch):
    folder = _folder()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "root"))
    assert folder.directory() is None and folder.default_dir() == tmp_path / "root" / "things"
    for off in ("off", "0", "", "none"):
        monkeypatch.setenv(folder.env, off)
        folder.use_default()
        assert folder.directory() is None
        folder.write("a", b"x")
        assert not folder.has("a")
    monkeypatch.setenv(folder.env, str(tmp_path / "chosen"))
    assert folder.directory() == tmp_path / "chosen"
    monkeypatch.delenv(folder.env)
    folder.use_default()
    assert folder.directory() == tmp_path / "root" / "things" and folder.directory().is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(folder.env, str(blocker / "things"))
    folder.use(None)
    folder.write("a", b"x")  # cannot be written: nothing kept, no error
    assert folder.read("a") is None and list(tmp_path.glob("**/*.bin")) == []
