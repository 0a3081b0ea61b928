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
            arrays = {name: archive[name] for name in archive.files}
    except WorkbenchError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zipfile.LargeZipFile,
            NotImplementedError, RuntimeError) as exc:
        raise error(f"{path}: not {what} ({exc})") from None
    for name, value in arrays.items():
        if not isinstance(value, np.ndarray):  # numpy hands back a member that is no .npy as bytes
            raise error(f"{path}: not {what} (member {name!r} is not an .npy array)")
    return arrays


def _check_sizes(archive: np.lib.npyio.NpzFile, path: Path, error: type[WorkbenchError]) -> None:
    if archive.zip is None:
        return
    for info in archive.zip.infolist():
        name = info.filename.removesuffix(".npy")
        if info.file_size > MAX_ARRAY_BYTES:
            raise error(f"{path}: array {name!r} holds {info.file_size} bytes, more than the limit "
                        f"of {MAX_ARRAY_BYTES} (hw.npz.MAX_ARRAY_BYTES)")
        promised = _promised_bytes(archive.zip, info)  # numpy reads any member with the magic
        if promised is not None and promised > info.file_size:
            # numpy would allocate what the header promises before finding the data missing
            raise error(f"{path}: array {name!r}: its header promises {promised} bytes of data, the "
                        f"archive holds {info.file_size}")


def _promised_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int | None:
    """The data bytes an .npy member's header promises (None when the header does not parse:
    numpy's own reading of it then names what is wrong)."""
    with archive.open(info) as member:
        try:
            major, _ = np.lib.format.read_magic(member)
            read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(member)
        except (ValueError, EOFError, OSError, TypeError, SyntaxError):
            return None
    count = 1
    for dim in shape:
        count *= dim
    return count * dtype.itemsize
