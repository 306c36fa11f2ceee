"""The shipped FrontierMath prompt and defaults against the seed's own text, rule by rule.

``fixtures/frontiermath-prompt.ja.txt`` is the seed's prompt verbatim (Japanese). Each rule is
a pair: a phrase that must be in the seed, and its English rendering that must be in the prompt
Proctor sends by default. A rule dropped or reworded in ``configs/prompts/frontiermath.txt``,
or a default limit or library pin that drifts from the seed, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proctor.agent.inputs.config import BudgetConfig, ModelConfig, RunConfig, SandboxConfig
from proctor.agent.tracks.frontiermath.prompt import load_template, render_prompt
from tests.frontiermath.support import integer_task

ROOT = Path(__file__).resolve().parents[2]
SEED = (Path(__file__).parent / "fixtures" / "frontiermath-prompt.ja.txt").read_text(encoding="utf-8")
PINS = re.compile(r"^\s*•\s*([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.]*)\s*$", re.MULTILINE)

# (seed phrase, its rendering in the prompt sent with the default configuration), in seed order.
RULES = [
    ("pythonツールを使って任意のPythonコードを実行する", "Run arbitrary Python code using the python tool"),
    ("submit_answerツールを使って答えを提出する", "submit it using the submit_answer tool"),
    ("1,000,000トークンという絶対的な上限がある", "There is an absolute limit of 1,000,000 tokens"),
    (
        "（答えを提出していなくても）会話はただちに終了する",
        "the conversation ends immediately (even if you have not submitted an answer)",
    ),
    ("660,000トークンに達すると（ただし絶対的な上限の1,000,000未満）", "Once you reach 660,000 tokens"),
    (
        "次のメッセージでsubmit_answerツールを使うことが強制される",
        "you will be required to use the submit_answer tool in your next message",
    ),
    ("ただし保証ではない", "It is not a guarantee"),
    (
        "入力トークンと出力トークンの両方が上限に数えられる",
        "Both input tokens and output tokens count towards the limits",
    ),
    ("答えが正しければ1点を得る", "If your answer is correct, you earn 1 point"),
    ("答えを提出しなかった場合は0点になる", "if you do not submit an answer, you get 0 points"),
    (
        "答えを提出する前に、推論を私に説明すること",
        "Explain your reasoning to me before you submit your answer",
    ),
    ("大まかな計画を立てることを強く勧める", "We strongly recommend that you begin by making a rough plan"),
    ("異なるアプローチを考えること", "think of different approaches"),
    (
        "重要な発見を定期的にまとめ、必要なら計画を見直すこと",
        "regularly summarise your important findings, and revise the plan",
    ),
    (
        "答えが問題の要件をすべて満たしているか確認すること",
        "check that your answer satisfies every requirement of the problem",
    ),
    ("別のアプローチを試す価値があるかもしれない", "it may be worth trying a different approach"),
    ("‘answer’という名前のPython関数のコードを渡す", "Pass it the code of a Python function named 'answer'"),
    ("引数を取らない", "it takes no arguments"),
    ("答えを{answer_type}として返す", "it returns the answer as Python int"),
    ("何も出力しない", "it prints nothing"),
    ("コードコメントを含まない", "it contains no code comments"),
    ("answer関数の最大実行時間は30秒である", "the answer function may run for at most 30 seconds"),
    ("結果を見るには必ずprint()を使うこと", "always use print() to see results"),
    ("おそらくprintを忘れている", "you have most likely forgotten to print"),
    (
        "ツールは状態をまったく保持せず、何も事前にインポートされていない",
        "The tool keeps no state whatsoever, and nothing is imported in advance",
    ),
    ("毎回インポートしなければならない", "you must import it every time"),
    (
        "必要なものは呼び出しのたびに定義し直さなければならない",
        "you must define everything you need again in each call",
    ),
    ("pythonツールを使って答えを提出しないこと", "Do not use the python tool to submit your answer"),
    ("pythonツールの呼び出しの最大実行時間は30秒である", "A python tool call may run for at most 30 seconds"),
    ("2025年の一般的な汎用ハードウェアで実行される", "typical general-purpose commodity hardware from 2025"),
    ("答えの型は{answer type}である", "The answer type is Python int."),
]


def seed_pins() -> dict[str, str]:
    return dict(PINS.findall(SEED))


def default_prompt() -> str:
    config = RunConfig(track="frontiermath", tasks=Path("t.jsonl"), models=[ModelConfig(name="openai/m")])
    return render_prompt(load_template(None), integer_task(), config, seed_pins())


def test_the_default_limits_are_the_seeds() -> None:
    budget, sandbox = BudgetConfig(), SandboxConfig()
    assert "1,000,000トークン" in SEED and budget.token_cap == 1_000_000
    assert "660,000トークンに達すると" in SEED and budget.force_submit_at == 660_000
    assert "answer関数の最大実行時間は30秒" in SEED and sandbox.answer_timeout_s == 30
    assert "pythonツールの呼び出しの最大実行時間は30秒" in SEED and sandbox.timeout_s == 30


def test_the_sandbox_image_pins_exactly_the_seeds_libraries() -> None:
    requirements = (ROOT / "images" / "frontiermath-python" / "requirements.in").read_text(encoding="utf-8")
    pinned = dict(
        line.split("==", 1) for line in requirements.splitlines() if line.strip() and not line.startswith("#")
    )
    assert len(seed_pins()) == 8
    assert pinned == seed_pins()


@pytest.mark.parametrize(("seed", "rendered"), RULES, ids=[english[:40] for _, english in RULES])
def test_each_rule_of_the_seed_prompt_is_in_the_default_prompt(seed: str, rendered: str) -> None:
    assert seed in SEED, f"not a phrase of the seed: {seed!r}"
    assert rendered in default_prompt(), f"the prompt lacks the rendering of {seed!r}"


def test_the_default_prompt_keeps_the_seeds_order_and_library_list() -> None:
    prompt = default_prompt()
    positions = [prompt.index(rendered) for _, rendered in RULES]
    assert positions == sorted(positions), "the rules appear in another order than in the seed"
    listed = [line.strip().removeprefix("• ") for line in prompt.splitlines() if "==" in line]
    assert listed == [f"{name}=={version}" for name, version in seed_pins().items()]
    assert prompt.rstrip().endswith(integer_task().question)
