"""`proctor` with the audited sandbox swapped for a weakened one named in PROCTOR_TEST_WEAKEN.

Test-only: the product has no way to weaken its sandbox; tests run this script instead.
"""

from __future__ import annotations

import os

from proctor.agent.cli import audit_cmd, main
from proctor.sandbox import Limits, Sandbox
from tests.audit.weakened import open_weakened


async def _open_weakened(backend: str, image: str | None, pool_size: int, limits: Limits) -> Sandbox:
    return await open_weakened(os.environ["PROCTOR_TEST_WEAKEN"], limits, pool_size)


if __name__ == "__main__":
    audit_cmd.open_audited_sandbox = _open_weakened
    main()
