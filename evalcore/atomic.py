"""Write a file whole or not at all, without ever replacing what is not a regular file.

Exports and case banks are written to a temporary file beside the destination and renamed over
it when complete, so a failure never leaves half a file. A rename over ``/dev/null``, a FIFO or
another device would *replace* it with a regular file (seen: ``evalsite export RUN -o /dev/null``
turned ``/dev/null`` into a file for every process of the machine), so such a destination is
written straight through instead: there is no half-file to protect there.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_special(path: Path) -> bool:
    """True when ``path`` exists and is not a regular file (a character or block device, a
    FIFO, a socket), following symbolic links as ``open`` does."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def write_chunks(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> int:
    """Write ``chunks`` to ``path``; the number of bytes written.

    A regular (or new) file is written to a temporary name beside it, given the permissions a
    shell's ``>`` would (0666 less the umask), and renamed over ``path`` once complete; a device
    or FIFO is opened and written in place (:func:`is_special`). Parent folders are created.

    Raises:
        OSError: The file cannot be written; for a regular file nothing is left at ``path``
            then (the temporary file is removed), and an existing file is unchanged.
    """
    target = Path(path)
    count = 0
    if is_special(target):
        with open(target, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                count += len(chunk)
        return count
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                count += len(chunk)
        os.chmod(tmp_name, 0o666 & ~_umask())  # mkstemp makes it 0600; a file as `>` would make it
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return count
