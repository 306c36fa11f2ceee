"""Import every command module so its commands register on the shared apps."""

from proctor.agent.cli import (  # noqa: F401
    audit_cmd,
    bench_eed_cmd,
    bench_loop_cmd,
    bench_submission_cmd,
    export_cmd,
    image_cmd,
    rescore_cmd,
    run_cmd,
    sandbox_cmd,
    score_cmd,
    validate_cmd,
    view_cmd,
)
