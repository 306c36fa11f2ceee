"""The Inspect task the provider's end-to-end tests evaluate (not a test module itself).

A model with Inspect's bash tool is asked to write a note, then read it back;
the scorer records what the sandbox itself says (uid, network interfaces, the note), whatever the model did.
``script``: ``notes`` scripts the two tool calls with Inspect's mockllm model; ``hang`` scripts
one call that marks its start and sleeps, for the kill test; empty: the model given on the
command line acts (the local model).
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import Model, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Scorer, Target, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import bash
from inspect_ai.util import sandbox

MOCK = "mockllm/model"
WRITE_NOTE = "echo persisted-across-calls > note.txt"
READ_NOTE = "cat note.txt; id -u; ls /sys/class/net"
HANG = "touch /work/started; sleep 600"


def scripted_model(script: str) -> Model | None:
    if script == "notes":
        outputs = [
            ModelOutput.for_tool_call(MOCK, "bash", {"command": WRITE_NOTE}),
            ModelOutput.for_tool_call(MOCK, "bash", {"command": READ_NOTE}),
            ModelOutput.from_content(MOCK, "The note reads persisted-across-calls."),
        ]
    elif script == "hang":
        outputs = [ModelOutput.for_tool_call(MOCK, "bash", {"command": HANG})]
    else:
        return None
    for output in outputs:
        # Usage given: mockllm would otherwise count tokens with tiktoken's o200k_base, which
        # tiktoken downloads on first use (no network here).
        output.usage = ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)
    return get_model(MOCK, custom_outputs=outputs)


@scorer(metrics=[])
def sandbox_facts() -> Scorer:
    """A scorer, so it runs even when the model used up the message limit."""

    async def score(state: TaskState, target: Target) -> Score:
        box = sandbox()
        note = await box.exec(["cat", "note.txt"])
        facts = {
            "uid": (await box.exec(["id", "-u"])).stdout.strip(),
            "interfaces": (await box.exec(["ls", "/sys/class/net"])).stdout.split(),
            "note": note.stdout if note.success else None,
        }
        return Score(value=1 if facts["note"] == f"{target.text}\n" else 0, metadata=facts)

    return score


@task
def notes(script: str = "") -> Task:
    return Task(
        dataset=[
            Sample(
                input=(
                    "Use the bash tool twice. First run: echo persisted-across-calls > note.txt "
                    "Then run: cat note.txt"
                ),
                target="persisted-across-calls",
            )
        ],
        solver=[use_tools(bash(timeout=120)), generate()],
        scorer=sandbox_facts(),
        model=scripted_model(script),
        # user, then at most two tool calls and their results, then the answer.
        message_limit=6,
    )
