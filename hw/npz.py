"""Reading the `.npz` files a user hands the workbench (Programs, compiled models, inputs).

The promise: no pickle is ever loaded (`allow_pickle=False`), no file is read that is not a
regular file (a device such as /dev/zero would never end), and nothing is allocated past the
limits below, checked from the file's size and the archive's directory before any array is
read.  Every failure is the caller's WorkbenchError subclass, with one line naming the file.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from hw.errors import WorkbenchError

MAX_FILE_BYTES = 1 << 32  # 4 GiB: as much as a 32-bit DRAM address reaches
MAX_ARRAY_BYTES = 1 << 32


def read_npz(path: str | Path, *, error: type[WorkbenchError], what: str) -> dict[str, np.ndarray]:
    """Every array of the npz archive at `path`, or `error` ("<path>: no such file", "<path>:
    not <what> (why)", or a limit named with its value)."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: no such file")
    if not path.is_file():
        raise error(f"{path}: not {what} (not a regular file)")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise error(f"{path}: {size} bytes, more than the limit of {MAX_FILE_BYTES} bytes for {what} "
                    "(hw.npz.MAX_FILE_BYTES)")
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise ValueError("an array, not an npz archive")
        with loaded as archive:
            _check_sizes(archive, path, error)
            return {name: archive[name] for name in archive.files}
    except WorkbenchError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zipfile.LargeZipFile,
            NotImplementedError, RuntimeError) as exc:
        raise error(f"{path}: not {what} ({exc})") from None


def _check_sizes(archive: np.lib.npyio.NpzFile, path: Path, error: type[WorkbenchError]) -> None:
    for info in archive.zip.infolist() if archive.zip is not None else ():
        if info.file_size > MAX_ARRAY_BYTES:
            name = info.filename.removesuffix(".npy")
            raise error(f"{path}: array {name!r} holds {info.file_size} bytes, more than the limit "
                        f"of {MAX_ARRAY_BYTES} (hw.npz.MAX_ARRAY_BYTES)")
