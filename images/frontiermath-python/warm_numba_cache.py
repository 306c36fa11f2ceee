"""Compile galois's numba-cached kernels at build time and check they landed on disk.

Run by the Dockerfile with NUMBA_CACHE_DIR pointing at the image's read-only cache
(/opt/numba-cache). `import galois` compiles its `cache=True` kernels eagerly (they
carry explicit signatures), so importing it once writes every index (.nbi) and
data (.nbc) file the sandbox will later only read.
"""

import os
import pathlib
import sys

cache_dir = pathlib.Path(os.environ["NUMBA_CACHE_DIR"])

import galois  # noqa: E402  (the import is the compilation step)

# Exercise a small field too: this fails the build if numba and galois disagree.
field = galois.GF(2**8)
if int((field(3) * field(7)) + field(1)) != 8:
    sys.exit("galois.GF(2**8) arithmetic gave an unexpected result")

index_files = sorted(cache_dir.rglob("*.nbi"))
data_files = sorted(cache_dir.rglob("*.nbc"))
if not index_files or not data_files:
    sys.exit(f"numba wrote no cache files under {cache_dir}")
for path in index_files:
    print(f"numba cache: {path.relative_to(cache_dir)}")
print(f"numba cache: {len(index_files)} index and {len(data_files)} data files")
