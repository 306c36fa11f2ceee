"""The failure policy's edges, in process (real openai SDK, scripted servers on 127.0.0.1).

The attacks: a refusal spelled 403 or only in the error's ``type``; a plain rate limit that must
not stop a run; a judge, not the model, whose key is refused; retries of the judge and of calls
that finally failed; credentials inside a base URL; a run recorded before endpoints were.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from proctor.agent.errors import UserError
from proctor.agent.inputs.config import ModelConfig, RunConfig
from proctor.agent.model.endpoint import Endpoint, without_secrets
from proctor.agent.run.endpoint_record import endpoint_changes, pin_recorded_endpoints, refuse_or_record
from proctor.agent.run.preflight import PREFLIGHT_PROMPT
from proctor.agent.run.runner import RunResult, execute_run
from tests.runner.conftest import make_config, quiet_progress, read_lines, write_tasks
from tests.support.scripted_server import HttpError, Reply, ScriptedServer, Step


async def run(config: RunConfig, **options: Any) -> RunResult:
    return await execute_run(config, progress=quiet_progress(), handle_signals=False, **options)


def echo_model(base_url: str, retries: int = 0) -> list[ModelConfig]:
    return [ModelConfig(name="openai/echo-model", base_url=base_url, max_retries=retries)]


@pytest.mark.parametrize(
    ("refusal", "kind"),
    [
        (HttpError(403, "this key may not use this model"), "auth"),
        (HttpError(401, "expired"), "auth"),
        # Some servers spell it only in the error's type, with no code.
        (HttpError(429, "billing", type="insufficient_quota"), "quota"),
    ],
)
async def test_every_spelling_of_a_refusal_stops_the_run(
    tmp_path: Path, refusal: HttpError, kind: str
) -> None:
    def script(request: dict[str, Any], index: int) -> Step:
        return Reply(content="a0") if index == 0 else refusal

    tasks = write_tasks(tmp_path / "tasks.jsonl", 5)
    with ScriptedServer(script) as server:
        config = make_config(
            tasks, tmp_path / "run", server.base_url, models=echo_model(server.base_url, 6), max_concurrency=1
        )
        result = await run(config)
        calls = server.call_count
    assert result.status == f"stopped: {kind}" and result.stop is not None and result.stop.kind == kind
    assert calls == 2  # never retried, and no sample started after the refusal
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert [r["outcome"] for r in records] == ["correct", "model_error"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == f"stopped: {kind}"


async def test_a_plain_rate_limit_is_retried_counted_and_does_not_stop_the_run(tmp_path: Path) -> None:
    def script(request: dict[str, Any], index: int) -> Step:
        if index == 0:
            return HttpError(429, "slow down", code="rate_limit_exceeded", retry_after="0")
        return Reply(content=request["messages"][-1]["content"].removeprefix("say:"))

    tasks = write_tasks(tmp_path / "tasks.jsonl", 3)
    with ScriptedServer(script) as server:
        config = make_config(
            tasks, tmp_path / "run", server.base_url, models=echo_model(server.base_url, 2), max_concurrency=1
        )
        result = await run(config)
        calls = server.call_count
    assert result.status == "finished" and result.stop is None and calls == 4
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert [r["retries"] for r in records] == [1, 0, 0]
    assert {r["outcome"] for r in records} == {"correct"}
    assert result.summary["overall"]["model_retries"] == 1


def write_research_tasks(path: Path, count: int) -> Path:
    rows = [{"id": f"r{i}", "question": "Explain X.", "rubric": "Up to 10 points."} for i in range(count)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def research_config(tmp_path: Path, model_url: str, judge: ModelConfig | None, **changes: Any) -> RunConfig:
    return RunConfig(
        track="research",
        tasks=write_research_tasks(tmp_path / "tasks.jsonl", changes.pop("tasks", 3)),
        out=tmp_path / "run",
        models=[ModelConfig(name="openai/answerer", base_url=model_url, max_retries=0)],
        judge=judge,
        trials=1,
        max_concurrency=1,
        **changes,
    )


async def test_a_judge_whose_key_is_refused_stops_the_run_too(tmp_path: Path) -> None:
    with (
        ScriptedServer(lambda request, index: Reply(content="An answer.")) as model_server,
        ScriptedServer(lambda request, index: HttpError(401, "judge key revoked")) as judge_server,
    ):
        judge = ModelConfig(name="openai/grader", base_url=judge_server.base_url, max_retries=3)
        result = await run(research_config(tmp_path, model_server.base_url, judge))
        calls = (model_server.call_count, judge_server.call_count)
    assert result.status == "stopped: auth" and result.stop is not None
    assert (result.stop.role, result.stop.model) == ("judge", "openai/grader")
    assert calls == (1, 1)
    [record] = read_lines(tmp_path / "run" / "samples.jsonl")
    assert record["outcome"] == "judge_error" and "HTTP 401" in record["error"]


async def test_judge_retries_are_counted_apart_from_the_model_s(tmp_path: Path) -> None:
    def judge_script(request: dict[str, Any], index: int) -> Step:
        return HttpError(503, "busy", retry_after="0") if index % 2 == 0 else Reply(content="VERDICT: 8")

    with (
        ScriptedServer(lambda request, index: Reply(content="An answer.")) as model_server,
        ScriptedServer(judge_script) as judge_server,
    ):
        judge = ModelConfig(name="openai/grader", base_url=judge_server.base_url, max_retries=2)
        result = await run(research_config(tmp_path, model_server.base_url, judge, tasks=2))
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert [(r["retries"], r["judge_retries"]) for r in records] == [(0, 1), (0, 1)]
    assert [r["outcome"] for r in records] == ["correct", "correct"]
    overall = result.summary["overall"]
    assert (overall["model_retries"], overall["judge_retries"]) == (0, 2)


@pytest.mark.parametrize("track", ["olympiad", "research"])
async def test_a_judged_track_without_a_judge_calls_nothing(tmp_path: Path, track: str) -> None:
    with ScriptedServer(lambda request, index: Reply(content="An answer.")) as server:
        config = research_config(tmp_path, server.base_url, None)
        config = config.model_copy(update={"track": track})
        with pytest.raises(UserError, match=f"track '{track}' is graded by a judge, but this run has none"):
            await run(config, preflight=True)
        assert server.requests == []
    assert not (tmp_path / "run").exists()


async def test_the_preflight_probes_model_and_judge_once_each_with_the_run_s_settings(tmp_path: Path) -> None:
    with (
        ScriptedServer(lambda request, index: Reply(content="An answer.")) as model_server,
        ScriptedServer(lambda request, index: Reply(content="VERDICT: 9")) as judge_server,
    ):
        judge = ModelConfig(name="openai/grader", base_url=judge_server.base_url, reasoning_effort="low")
        config = research_config(tmp_path, model_server.base_url, judge, tasks=1)
        result = await run(config, preflight=True)
        model_bodies, judge_bodies = model_server.bodies(), judge_server.bodies()
    assert result.status == "finished"
    # The first request to each endpoint is the preflight's: tiny, with the run's own settings.
    for bodies, effort in ((model_bodies, "high"), (judge_bodies, "low")):
        assert bodies[0]["messages"] == [{"role": "user", "content": PREFLIGHT_PROMPT}]
        assert bodies[0]["max_completion_tokens"] == 16 and bodies[0]["reasoning_effort"] == effort
        assert len(bodies) == 2 and PREFLIGHT_PROMPT not in json.dumps(bodies[1])
    session = json.loads((tmp_path / "run" / "run.json").read_text())["sessions"][-1]
    assert [(p["role"], p["ok"]) for p in session["preflight"]] == [("model", True), ("judge", True)]
    # The probes are spent tokens: each records what its endpoint reported (the scripted default).
    assert [(p["input_tokens"], p["output_tokens"], p["usage_estimated"]) for p in session["preflight"]] == [
        (10, 5, False),
        (10, 5, False),
    ]


async def test_a_rate_limited_preflight_lets_the_run_start_and_wait(tmp_path: Path) -> None:
    def script(request: dict[str, Any], index: int) -> Step:
        # The preflight and its one retry are told to slow down; the run's calls get through.
        if index < 3:
            return HttpError(429, "slow down", code="rate_limit_exceeded", retry_after="0")
        return Reply(content="a0")

    tasks = write_tasks(tmp_path / "tasks.jsonl", 1)
    with ScriptedServer(script) as server:
        config = make_config(tasks, tmp_path / "run", server.base_url, models=echo_model(server.base_url, 3))
        result = await run(config, preflight=True)
    assert result.status == "finished"
    [record] = read_lines(tmp_path / "run" / "samples.jsonl")
    assert record["outcome"] == "correct" and record["retries"] == 1  # the sample's own wait
    [probe] = json.loads((tmp_path / "run" / "run.json").read_text())["sessions"][-1]["preflight"]
    assert probe["ok"] and "rate limited" in probe["note"]


async def test_credentials_in_a_base_url_never_reach_the_run_directory(tmp_path: Path) -> None:
    def script(request: dict[str, Any], index: int) -> Step:
        # The preflight and t00 answered; t01 rejected, so its error names the endpoint.
        return Reply(content="a0") if index < 2 else HttpError(400, "bad request")

    tasks = write_tasks(tmp_path / "tasks.jsonl", 2)
    with ScriptedServer(script) as server:
        with_secret = server.base_url.replace("http://", "http://user:sk-in-the-url@")
        config = make_config(
            tasks, tmp_path / "run", with_secret, models=echo_model(with_secret), max_concurrency=1
        )
        result = await run(config, preflight=True)
    assert result.status == "finished"
    records = read_lines(tmp_path / "run" / "samples.jsonl")
    assert [r["outcome"] for r in records] == ["correct", "model_error"]
    assert f"{server.base_url} rejected the request (HTTP 400)" in records[1]["error"]
    for name in ("run.json", "samples.jsonl", "summary.json"):
        text = (tmp_path / "run" / name).read_text()
        assert "sk-in-the-url" not in text, name
    header = json.loads((tmp_path / "run" / "run.json").read_text())
    assert header["endpoints"][0]["base_url"] == server.base_url
    assert header["config"]["models"][0]["base_url"] == server.base_url


def test_without_secrets_drops_user_password_and_credential_like_query_values() -> None:
    assert without_secrets("https://u:p@api.example.com:8443/v1#f") == "https://api.example.com:8443/v1"
    recorded = without_secrets("https://h/v1?api-version=2024-10&api_key=sk-x&Token=t&sig=s")
    assert recorded == "https://h/v1?api-version=2024-10&api_key=REDACTED&Token=REDACTED&sig=REDACTED"
    assert without_secrets("http://[::1]:9000/v1") == "http://[::1]:9000/v1"
    assert without_secrets("not a url") == "not a url"


def test_a_named_key_variable_must_be_set_even_for_a_loopback_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PROCTOR_UNSET_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    named = ModelConfig(name="openai/m", base_url="http://127.0.0.1:9/v1", api_key_env="PROCTOR_UNSET_KEY")
    with pytest.raises(UserError, match="judge 'openai/m': the key variable PROCTOR_UNSET_KEY is not set"):
        Endpoint.from_config(named, role="judge")
    # The default variable may stay unset for a self-hosted endpoint, as before.
    assert Endpoint.from_config(named.model_copy(update={"api_key_env": "OPENAI_API_KEY"})).api_key


def test_endpoint_changes_compare_each_model_and_the_judge_by_label() -> None:
    before = [
        {"role": "model", "label": "m", "base_url": "http://127.0.0.1:1/v1"},
        {"role": "judge", "label": "j", "base_url": "http://127.0.0.1:2/v1"},
    ]
    now = [
        {"role": "model", "label": "m", "base_url": "http://127.0.0.1:1/v1"},
        {"role": "model", "label": "new", "base_url": "http://127.0.0.1:3/v1"},  # added: no conflict
        {"role": "judge", "label": "j", "base_url": "http://127.0.0.1:4/v1"},
    ]
    changes = endpoint_changes(before, now)
    assert changes == [
        {"role": "judge", "label": "j", "from": "http://127.0.0.1:2/v1", "to": "http://127.0.0.1:4/v1"}
    ]
    with pytest.raises(
        UserError,
        match=re.escape(
            "judge j ran against http://127.0.0.1:2/v1, and its base_url now names http://127.0.0.1:4/v1"
        ),
    ):
        refuse_or_record(changes, allowed=False, run_json="run.json", now="t")
    [event] = refuse_or_record(changes, allowed=True, run_json="run.json", now="t")
    assert event["event"] == "endpoint_change" and event["at"] == "t"
    # A run recorded before endpoints were has nothing to compare against.
    assert endpoint_changes(None, now) == [] and endpoint_changes("garbage", now) == []


# -- a resume talks to the recorded endpoint, not to the new shell's environment ------------------

RECORDED = "http://10.1.2.3:8000/v1"


def _resumed(models: list[ModelConfig], judge: ModelConfig | None = None) -> RunConfig:
    return RunConfig(track="olympiad", tasks=Path("t.jsonl"), models=models, judge=judge, resume=True)


def _record(*entries: tuple[str, str, str]) -> list[dict[str, str]]:
    return [{"role": role, "label": label, "base_url": url} for role, label, url in entries]


@pytest.mark.parametrize("environment_url", [None, "https://api.openai.com/v1", "http://127.0.0.1:9/v1"])
def test_a_url_from_the_environment_is_pinned_to_the_recorded_one(
    monkeypatch: pytest.MonkeyPatch, environment_url: str | None
) -> None:
    if environment_url is None:
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", environment_url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    model = ModelConfig(name="openai/m", api_key_env="OPENAI_API_KEY")
    judge = ModelConfig(name="openai/j", api_key_env="OPENAI_API_KEY")
    record = _record(("model", "openai/m", RECORDED), ("judge", "openai/j", "http://127.0.0.1:7/v1"))
    pinned = pin_recorded_endpoints(_resumed([model], judge), record, ["openai/m"], "run.json")
    assert pinned.models[0].base_url == RECORDED
    assert pinned.judge is not None and pinned.judge.base_url == "http://127.0.0.1:7/v1"
    # The key is still read from the recorded variable: the pin changes only where requests go.
    assert Endpoint.from_config(pinned.models[0]).api_key == "k"


def test_a_named_url_a_local_server_and_an_unrecorded_model_are_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    named = ModelConfig(name="openai/named", base_url="http://127.0.0.1:5/v1")
    local = ModelConfig(name="local/gemma3-270m")
    new = ModelConfig(name="openai/new")
    record = _record(
        ("model", "openai/named", RECORDED),
        ("model", "local/gemma3-270m", "local llama.cpp server (started by proctor)"),
    )
    config = _resumed([named, local, new])
    assert (
        pin_recorded_endpoints(config, record, ["openai/named", "local/gemma3-270m", "openai/new"], "r")
        is config
    )
    # A run recorded before endpoints were has nothing to pin to.
    assert pin_recorded_endpoints(config, None, ["a", "b", "c"], "r") is config


def test_the_same_endpoint_keeps_the_environments_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pw@127.0.0.1:9/v1?api_key=s3cret")
    config = _resumed([ModelConfig(name="openai/m")])
    record = _record(("model", "openai/m", without_secrets("http://user:pw@127.0.0.1:9/v1?api_key=s3cret")))
    assert pin_recorded_endpoints(config, record, ["openai/m"], "r") is config


def test_a_recorded_url_whose_credentials_were_dropped_or_a_missing_key_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    config = _resumed([ModelConfig(name="openai/m")])
    redacted = _record(("model", "openai/m", "https://proxy.example/v1?token=REDACTED"))
    with pytest.raises(UserError, match=r"whose credentials run\.json does not keep"):
        pin_recorded_endpoints(config, redacted, ["openai/m"], "r")
    # A hostile or damaged record cannot point the run at a non-HTTP target.
    with pytest.raises(UserError, match="give the full URL again"):
        pin_recorded_endpoints(
            config, _record(("model", "openai/m", "file:///etc/passwd")), ["openai/m"], "r"
        )
    # The first session needed a key for this remote URL; the pin must not turn it keyless.
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(UserError, match="the key variable OPENAI_API_KEY is not set"):
        pin_recorded_endpoints(config, _record(("model", "openai/m", RECORDED)), ["openai/m"], "r")
