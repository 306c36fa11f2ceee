"""The messages around a forced turn never contradict each other, and every text the model
sees beside the prompt is written down in docs/frontiermath.md with its source.

From the forcing threshold the next message is the forced notice ("submit now"); before it,
a reply without a tool call also got the reminder to keep working with the python tool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proctor.agent.results.records import Outcome, SampleRecord
from proctor.agent.tracks.frontiermath.profiles import PROFILES, get_profile
from proctor.agent.tracks.frontiermath.tools import NOTHING_PRINTED
from proctor.agent.tracks.frontiermath.track import FrontierMathTrack
from proctor.sandbox import Sandbox
from tests.frontiermath.support import context, integer_task, run_config, scripted_client
from tests.support.scripted_server import Reply, ReportedUsage, ScriptedServer, Step

module_loop = pytest.mark.asyncio(loop_scope="module")
DOCS = (Path(__file__).resolve().parents[2] / "docs" / "frontiermath.md").read_text(encoding="utf-8")
# The profile fields whose text the model sees.
TEXT_FIELDS = (
    "submission_reply",
    "other_submission_reply",
    "no_tool_call_nudge",
    "status_message",
    "forced_notice",
    "empty_output_help",
)


async def run_text_only(
    sandbox: Sandbox, protocol: str, turns: int, **config: Any
) -> tuple[SampleRecord, list[dict[str, Any]]]:
    script: list[Step] = [Reply(content=f"turn {i}", usage=ReportedUsage(3_000, 500)) for i in range(turns)]
    run = run_config(protocol=protocol, **config)
    with ScriptedServer(script) as server:
        client = scripted_client(server.base_url)
        try:
            record = await FrontierMathTrack(run.track_options).run_sample(
                integer_task(), 0, context(client, sandbox, run)
            )
        finally:
            await client.aclose()
        bodies = [r.json for r in server.requests]
    return record, bodies


def after_last_reply(body: dict[str, Any]) -> list[str]:
    """The user messages the model got since its last reply."""
    messages = body["messages"]
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=0)
    return [m["content"] for m in messages[last + 1 :] if m["role"] == "user"]


@module_loop
@pytest.mark.parametrize("protocol", sorted(PROFILES))
async def test_a_forced_turn_gets_the_forced_notice_alone(sandbox: Sandbox, protocol: str) -> None:
    """3,500 tokens a turn, forcing from 10,000, cap 20,000: turns 4 and 5 are forced, and the
    model's reply before each is text only."""
    profile = get_profile(protocol)
    record, bodies = await run_text_only(sandbox, protocol, 8, token_cap=20_000, force_submit_at=10_000)
    assert record.forced_submission_turn == 4 and len(bodies) == 5
    for used, body in ((10_500, bodies[3]), (14_000, bodies[4])):
        notice = profile.forced_notice.format(used=used, force_at=10_000, cap=20_000)
        assert after_last_reply(body) == [notice]
    # Below the threshold the profile's own message between turns is still sent.
    between = profile.no_tool_call_nudge or profile.status_message
    assert between is not None and after_last_reply(bodies[1])[0].startswith(between.split("{")[0])


@module_loop
async def test_max_turns_is_a_last_bound(sandbox: Sandbox) -> None:
    record, bodies = await run_text_only(sandbox, "methodology", 5, track_options={"max_turns": 2})
    assert len(bodies) == 2 and record.outcome is Outcome.NO_SUBMISSION
    assert "stopped after 2 turns" in (record.error or "")


@pytest.mark.parametrize("protocol", sorted(PROFILES))
def test_every_model_visible_text_is_written_in_the_docs(protocol: str) -> None:
    """The docs quote each text verbatim (placeholders as written), so a reader of the page sees
    exactly what the model is told, and where it comes from."""
    profile = get_profile(protocol)
    for field in TEXT_FIELDS:
        text = getattr(profile, field)
        if text is not None:
            assert text in DOCS, f"{protocol}.{field} is not quoted in docs/frontiermath.md"
    assert NOTHING_PRINTED in DOCS
