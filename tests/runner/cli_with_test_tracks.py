"""`proctor` with the runner tests' tracks registered: `python -m tests.runner.cli_with_test_tracks run ...`.

The subprocess tests need a real `proctor run` process to kill; this is that process, with
two extra track names so it does not depend on any particular shipped track.
"""

from tests.runner.echo_track import register

register()

from proctor.agent.cli import main  # noqa: E402  (after registering, as the CLI resolves tracks lazily anyway)

if __name__ == "__main__":
    main()
