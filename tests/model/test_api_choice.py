"""Reasoning is carried by default (issue 23, item 2).

Invariant: with ``api: auto`` (the default) a model gets the Responses API exactly when it is
one of OpenAI's reasoning models *and* its requests go to api.openai.com; every other endpoint
or model gets Chat Completions. A stated ``api`` (config or ``-M api=``) always wins. The choice
and its reason are in ``--dry-run`` and run.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.agent.cli import commands_registry  # noqa: F401  (imports run_plan without a cycle)
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.inputs.model_overrides import parse_model_settings
from proctor.agent.model.api_choice import choose_api, is_openai_reasoning_model
from proctor.agent.model.factory import make_client
from proctor.agent.model.openai_client import OpenAIChatClient
from proctor.agent.model.responses_client import OpenAIResponsesClient
from proctor.agent.run.config_loader import RunFlags, load_run_config
from proctor.agent.run.dry_run import build_plan, render_plan
from proctor.agent.run.runner import execute_run
from tests.runner.conftest import quiet_progress
from tests.support.scripted_server import Reply, ScriptedServer

REPO = Path(__file__).resolve().parents[2]
REASONING = [
    "openai/o1",
    "openai/o3",
    "openai/o3-pro",
    "openai/o4-mini",
    "openai/o3-2025-04-16",
    "openai/gpt-5",
    "openai/GPT-5",
    "openai/gpt-5.2",
    "openai/gpt-5.2-pro",
    "openai/gpt-5-mini",
    "openai/gpt-5.1-codex",
    "openai/gpt-5-2025-08-07",
    "openai/codex-mini-latest",
    "gpt-5-nano",
]
NOT_REASONING = [
    "openai/gpt-4o",
    "openai/gpt-4.1",
    "openai/gpt-5-chat-latest",
    "openai/gpt-5.1-chat-latest",
    "openai/gpt-50",
    "openai/o",
    "openai/omni-moderation-latest",
    "openai/oss-20b",
    "meta-llama/Llama-3.1-8B",
    "openai/gpt-oss-120b",
    "local/gemma3-270m",
]


@pytest.fixture(autouse=True)
def _no_base_url_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.mark.parametrize("name", REASONING)
def test_openai_reasoning_models_on_openais_endpoint_get_the_responses_api(name: str) -> None:
    assert is_openai_reasoning_model(name)
    choice = choose_api(ModelConfig(name=name))
    assert (choice.api, choice.source) == ("responses", "auto")
    assert "api.openai.com" in choice.reason
    # The same, with OpenAI's URL written out.
    assert choose_api(ModelConfig(name=name, base_url="https://api.openai.com/v1/")).api == "responses"


@pytest.mark.parametrize("name", NOT_REASONING)
def test_other_models_on_openais_endpoint_get_chat_completions(name: str) -> None:
    assert not is_openai_reasoning_model(name)
    cfg = ModelConfig(name=name, base_url="https://api.openai.com/v1")
    choice = choose_api(cfg)
    assert choice.api == "chat" and "not an OpenAI reasoning model" in choice.reason


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "https://my-resource.openai.azure.com/openai/v1",
        "https://openrouter.ai/api/v1",
        "https://api.openai.com.evil.example/v1",
        "https://proxy.example/api.openai.com/v1",
    ],
)
def test_reasoning_models_elsewhere_get_chat_completions(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose_api(ModelConfig(name="openai/o3", base_url=url)).api == "chat"
    # OPENAI_BASE_URL moves the endpoint just as base_url does.
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    choice = choose_api(ModelConfig(name="openai/gpt-5"))
    assert choice.api == "chat" and "not OpenAI's" in choice.reason


@given(
    name=st.sampled_from(REASONING + NOT_REASONING) | st.text(max_size=30),
    host=st.from_regex(r"[a-z0-9]{1,12}(\.[a-z0-9]{1,8}){0,3}", fullmatch=True).filter(
        lambda h: h != "api.openai.com"
    ),
)
def test_no_endpoint_but_openais_is_ever_sent_to_the_responses_api_unasked(name: str, host: str) -> None:
    assert choose_api(ModelConfig(name=name or "m", base_url=f"https://{host}/v1")).api == "chat"


@given(name=st.sampled_from(REASONING + NOT_REASONING), api=st.sampled_from(["chat", "responses"]))
def test_a_stated_api_always_wins(name: str, api: str) -> None:
    for url in ("https://api.openai.com/v1", "http://127.0.0.1:9/v1"):
        choice = choose_api(ModelConfig.model_validate({"name": name, "base_url": url, "api": api}))
        assert (choice.api, choice.source) == (api, "stated")


def test_the_client_follows_the_choice_and_local_servers_get_chat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert isinstance(make_client(ModelConfig(name="openai/gpt-5")), OpenAIResponsesClient)
    assert isinstance(make_client(ModelConfig(name="openai/gpt-4o")), OpenAIChatClient)
    # Proctor's own llama.cpp server (the runner's override URL) is never OpenAI's.
    local = make_client(ModelConfig(name="local/gemma3-270m"), base_url_override="http://127.0.0.1:5/v1")
    assert isinstance(local, OpenAIChatClient)
    forced = make_client(ModelConfig(name="openai/gpt-5", api="chat"))
    assert isinstance(forced, OpenAIChatClient)


def test_dash_m_api_overrides_the_choice(tmp_path: Path) -> None:
    fields, _ = parse_model_settings(["api=chat"])
    assert fields == {"api": "chat"}
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("")
    flags = RunFlags(track="frontiermath", tasks=tasks, models=["openai/gpt-5"], model_settings=["api=chat"])
    made = load_run_config(None, flags)
    assert choose_api(made.models[0]).describe().startswith("chat (stated")
    auto = load_run_config(None, RunFlags(track="frontiermath", tasks=tasks, models=["openai/gpt-5"]))
    assert choose_api(auto.models[0]).api == "responses"


def test_the_shipped_openai_examples_carry_reasoning_on_openai() -> None:
    for name in ("frontiermath-openai.yaml", "olympiad-judged.yaml", "research-judged.yaml"):
        made = load_run_config(REPO / "configs" / "examples" / name, RunFlags())
        for model in [*made.models, *([made.judge] if made.judge else [])]:
            assert model.api == "auto", (name, model.name)
            assert choose_api(model).api == "responses", (name, model.name)


def test_dry_run_shows_the_api_and_why() -> None:
    made = RunConfig.model_validate(
        {
            "track": "frontiermath",
            "tasks": str(REPO / "configs" / "tasks" / "frontiermath-samples.jsonl"),
            "models": [{"name": "openai/o3"}, {"name": "openai/gpt-5", "base_url": "http://127.0.0.1:9/v1"}],
            "out": "/nonexistent/planned",
        }
    )
    text = render_plan(build_plan(made))
    assert "api responses (auto: OpenAI reasoning model on api.openai.com" in text
    assert "api chat (auto: endpoint is not OpenAI's (host 127.0.0.1))" in text


async def test_run_json_records_each_choice_and_its_reason(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "r1", "question": "Explain X.", "rubric": "10 points."}) + "\n")
    with (
        ScriptedServer(lambda request, index: Reply(content="An answer.")) as model_server,
        ScriptedServer(lambda request, index: Reply(content="ok\nVERDICT: 8")) as judge_server,
    ):
        made = RunConfig(
            track="research",
            tasks=tasks,
            trials=1,
            out=tmp_path / "run",
            models=[ModelConfig(name="openai/o3", base_url=model_server.base_url, max_retries=0)],
            judge=ModelConfig(
                name="openai/grader", base_url=judge_server.base_url, max_retries=0, api="responses"
            ),
        )
        await execute_run(made, progress=quiet_progress(), handle_signals=False)
        # What reached the wire: Chat Completions for the model, the Responses API for the judge.
        assert {r.path for r in model_server.requests} == {"/v1/chat/completions"}
        assert {r.path for r in judge_server.requests} == {"/v1/responses"}
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    assert header["models"][0]["api"] == "chat"
    assert header["api_choices"] == [
        {
            "role": "model",
            "label": "openai/o3",
            "api": "chat",
            "source": "auto",
            "reason": "endpoint is not OpenAI's (host 127.0.0.1)",
        },
        {
            "role": "judge",
            "label": "openai/grader",
            "api": "responses",
            "source": "stated",
            "reason": "api: responses in the config or -M api=responses",
        },
    ]
    assert header["config"]["models"][0]["api"] == "auto"
