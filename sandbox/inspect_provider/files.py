"""Reading and writing a sample's files from inside its container, as the sandbox user.

The programs below run through the same pinned wrapper as every exec (long_lived.py), by
absolute path, so the sandbox user's own permissions decide, and the read-only root stays
read-only: nothing is copied in or out with the engine's root authority. Each reports a failure
as ``proctor-errno:N`` on stderr and exit 3; the provider turns N into the error Inspect's
conformance suite expects (``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError``).
"""

from __future__ import annotations

import errno
import os
import posixpath
import re

from proctor.sandbox.docker.containers import WORKDIR

FAILED = 3
# The reader refuses a file over the limit before sending a byte of it.
TOO_LARGE = 4
_ERRNO = re.compile(rb"proctor-errno:(\d+)\n\Z")

READER = """\
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
    if os.path.isdir(sys.argv[1]):
        raise IsADirectoryError(21, 'Is a directory')
    if os.fstat(fd).st_size > int(sys.argv[2]):
        os._exit(4)
    left = int(sys.argv[2]) + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        left -= len(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(1, view):]
except OSError as exc:
    os.write(2, b'proctor-errno:%d\\n' % (exc.errno or 0))
    os._exit(3)
"""

WRITER = """\
import os, sys
path = sys.argv[1]
try:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, 'wb') as out:
        while chunk := os.read(0, 1 << 20):
            out.write(chunk)
except OSError as exc:
    os.write(2, b'proctor-errno:%d\\n' % (exc.errno or 0))
    os._exit(3)
"""


# The image's PATH, as the container's environment has it, for login shells (provider.py).
PROFILE_WRITER = """\
import os, shlex, sys
with open(sys.argv[1], 'w') as profile:
    profile.write('export PATH=' + shlex.quote(os.environ.get('PATH', '/usr/bin:/bin')) + '\\n')
"""


def container_path(file: str, workdir: str = WORKDIR) -> str:
    """Where ``file`` is inside the container: relative paths are the sample's working directory's."""
    return posixpath.normpath(posixpath.join(workdir, file))


def is_directory_alias(file: str) -> bool:
    return posixpath.basename(file.rstrip("/")) in (".", "..")


def reported_errno(stderr: bytes) -> int | None:
    match = _ERRNO.search(stderr)
    return int(match.group(1)) if match else None


def file_error(number: int, file: str) -> OSError:
    """The ``OSError`` subclass Python itself raises for ``number``, naming ``file`` as given.
    A write to the read-only root (EROFS) is a permission matter for the caller."""
    if number == errno.EROFS:
        return PermissionError(errno.EACCES, "Read-only file system (only /work and /tmp are writable)", file)
    return OSError(number, os.strerror(number), file)
