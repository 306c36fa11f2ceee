"""Build realistic run directories from SampleRecord objects, for report tests and timing.

The records follow what the FrontierMath and judge tracks write: Chat Completions-style
transcripts with python / submit_answer tool calls, per-turn usage with cumulative tokens,
forced submissions, sandbox ExecResult dicts, judge replies and EED scores. Model text
deliberately carries HTML and script fragments so escaping is exercised everywhere.

Usage: python -m tests.report.run_factory OUT_DIR [--samples N]
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from proctor.agent.results.records import (
    EEDRecord,
    JudgeRecord,
    Outcome,
    ReferenceRecord,
    SampleRecord,
    SubmissionRecord,
    ToolCallRecord,
    TurnUsage,
)
from proctor.agent.text.capped_text import text_sha256

XSS_TEXT = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> </script><!--'
VERIFY_CODE = (
    "def verify(a):\n    # a hostile task file may say anything: " + XSS_TEXT + "\n    return a == 1854\n"
)
JUDGE_TEMPLATE = "Problem: {problem}\nAttempted answer: {answer}\nReference answer: {reference}\nGrade it."
SUBJECTS = ("number theory", "combinatorics", "algebra", "finite fields", "p-adics")
IMAGE_ID = "sha256:3f1c0ffee0ddba11"
START = datetime(2026, 11, 30, 1, 0, 0, tzinfo=UTC)

_CODE_SNIPPETS = (
    "from sympy import factorint\n# factor the candidate\nn = 2**64 + 1\nprint(factorint(n))\n",
    "import itertools\ncount = 0\nfor p in itertools.permutations(range(7)):\n"
    '    if all(p[i] != i for i in range(7)):\n        count += 1\nprint("derangements:", count)\n',
    'def f(x):\n    """closed form"""\n    return x**3 - 2*x + 1\n\n'
    "print([f(k) for k in range(10)], 0x1F, 3.5e-2)\n",
    "import galois\nGF = galois.GF(2**8)\na = GF(17)\nprint(a ** 254 * a)\n",
    "while True:\n    pass\n",
    f"print({XSS_TEXT!r})\n",
)


def _usage_turns(
    rng: random.Random, n_turns: int, force_at: int, cap: int, burn: bool, runs_to_cap: bool = False
) -> list[TurnUsage]:
    """Per-turn usage whose cumulative sum reaches about a third of the cap by ``n_turns``.

    Growth is scaled to the cap, so runs with small test limits look like real ones.
    """
    growth = max(20, int(0.7 * cap / max(1, n_turns) ** 2))
    turns: list[TurnUsage] = []
    context = max(10, cap // 1000)
    cumulative = 0
    forced_done = False
    for turn in range(1, n_turns + 1):
        output = rng.randint(growth // 4, growth) if not burn else rng.randint(cap // 30, cap // 15)
        forced = not forced_done and cumulative >= force_at
        forced_done = forced_done or forced
        # The budget caps a request's output so the total never passes the cap.
        output = max(1, min(output, cap - cumulative - context))
        if cumulative + context >= cap:
            break
        cumulative += context + output
        # Burners think at length; reasoning tokens are billed but not sent back as context.
        reasoning = output * 9 // 10 if burn else output // 2
        turns.append(
            TurnUsage(
                turn=turn,
                input_tokens=context,
                output_tokens=output,
                reasoning_tokens=reasoning,
                cumulative_tokens=cumulative,
                forced_submission=forced,
            )
        )
        context += output - reasoning + rng.randint(growth // 10, growth // 2)
        if cumulative >= cap or (forced and not runs_to_cap):
            break
    return turns


def _exec(rng: random.Random, stdout: str, *, timed_out: bool = False, exit_code: int = 0) -> dict[str, Any]:
    return {
        "exit_code": None if timed_out else exit_code,
        "stdout": stdout,
        "stderr": "",
        "timed_out": timed_out,
        "oom_killed": False,
        "stdout_truncated": False,
        "stderr_truncated": False,
        "duration_s": 30.0 if timed_out else round(rng.lognormvariate(-1.5, 0.9), 4),
        "backend": "docker",
        "image": IMAGE_ID,
        "extra": {},
    }


def make_frontiermath_sample(
    rng: random.Random,
    index: int,
    *,
    run_id: str,
    model: str,
    force_at: int,
    cap: int,
    turns_hint: int = 12,
    output_chars: int = 600,
) -> SampleRecord:
    task_id = f"fm-{index // 2:04d}"
    trial = index % 2
    burn = rng.random() < 0.08
    n_turns = 60 if burn else rng.randint(max(2, turns_hint // 2), turns_hint + turns_hint // 2)
    turns = _usage_turns(rng, n_turns, force_at, cap, burn, runs_to_cap=burn and rng.random() < 0.3)
    forced_turn = next((t.turn for t in turns if t.forced_submission), None)
    question = f"Let N_{index} be the number of <b>derangements</b> of 7 & more. Compute N mod 1000."
    transcript: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are solving a FrontierMath problem. Tools: python, submit_answer.",
        },
        {"role": "user", "content": question},
    ]
    tool_calls: list[ToolCallRecord] = []
    # Two of three samples carry the FrontierMath loop's extra message fields (turn, kind, usage,
    # forced_submission); the rest are plain Chat Completions messages, as other tracks may write.
    loop_shaped = index % 3 != 0

    def annotate(message: dict[str, Any], turn: TurnUsage | None, **extra: Any) -> dict[str, Any]:
        if loop_shaped:
            message["turn"] = turn.turn if turn else 0
            if turn is not None and message["role"] == "assistant":
                message["usage"] = turn.model_dump()
                if turn.forced_submission:
                    message["forced_submission"] = True
            message.update(extra)
        return message

    cap_reached = bool(turns) and turns[-1].cumulative_tokens >= cap
    submits = not cap_reached
    for turn in turns[:-1] if submits else turns:
        code = rng.choice(_CODE_SNIPPETS)
        call_id = f"call_{index}_{turn.turn}"
        timed_out = code.startswith("while True")
        body = ("265 " * (output_chars // 4)).strip()
        truncated = rng.random() < 0.1
        if truncated:
            body += "\n[output truncated: 1048576 more bytes not shown]"
        result = "" if timed_out else body
        sandbox = _exec(rng, result, timed_out=timed_out)
        transcript.append(
            annotate(
                {
                    "role": "assistant",
                    "content": f"Turn {turn.turn}: trying an approach. {XSS_TEXT if turn.turn == 1 else ''}",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "python", "arguments": json.dumps({"code": code})},
                        }
                    ],
                },
                turn,
            )
        )
        shown = "Timed out after 30 s." if timed_out else result
        transcript.append(
            annotate(
                {"role": "tool", "tool_call_id": call_id, "content": shown},
                turn,
                name="python",
                duration_s=sandbox["duration_s"],
                truncated=truncated,
            )
        )
        tool_calls.append(
            ToolCallRecord(
                turn=turn.turn,
                call_id=call_id,
                name="python",
                raw_arguments=json.dumps({"code": code}),
                result=shown,
                truncated=truncated,
                duration_s=sandbox["duration_s"],
                sandbox=sandbox,
            )
        )
    outcome_roll = rng.random()
    submission: SubmissionRecord | None = None
    error: str | None = None
    if cap_reached:
        outcome = Outcome.NO_SUBMISSION
        error = "token cap reached before a submission"
    else:
        final_turn = turns[-1].turn
        if forced_turn is not None:
            transcript.append(
                annotate(
                    {
                        "role": "user",
                        "content": f"The conversation has used {turns[-2].cumulative_tokens:,} tokens, past "
                        f"the {force_at:,}-token threshold: call submit_answer now.",
                    },
                    turns[-1],
                    kind="forced_submission",
                )
            )
        answer_code = f"def answer():\n    return {1854 + index % 3}\n"
        call_id = f"call_{index}_submit"
        transcript.append(
            annotate(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": "submit_answer",
                                "arguments": json.dumps({"code": answer_code}),
                            },
                        }
                    ],
                },
                turns[-1],
            )
        )
        if outcome_roll < 0.55:
            outcome, verification = Outcome.CORRECT, "verify(a) returned True"
        elif outcome_roll < 0.85:
            outcome, verification = Outcome.INCORRECT, "verify(a) returned False"
        elif outcome_roll < 0.93:
            outcome, verification = Outcome.ANSWER_ERROR, None
            error = "answer() raised ZeroDivisionError: division by zero"
        else:
            outcome, verification = Outcome.ANSWER_TIMEOUT, None
            error = "answer() ran past 30 s"
        transcript.append(
            annotate({"role": "tool", "tool_call_id": call_id, "content": "Submission recorded."}, turns[-1])
        )
        submission = SubmissionRecord(
            code=answer_code,
            turn=final_turn,
            value_type="int",
            value_repr=str(1854 + index % 3),
            answer_exec=_exec(rng, str(1854 + index % 3), timed_out=outcome == Outcome.ANSWER_TIMEOUT),
            verify_exec=_exec(rng, "True" if outcome == Outcome.CORRECT else "False"),
            verification=verification,
        )
    reference = (
        ReferenceRecord(kind="verify", text=VERIFY_CODE)
        if index % 5
        else ReferenceRecord(kind="expected", text="1854 + 0", tolerance=None)
    )
    last = turns[-1]
    started = START + timedelta(seconds=index * 7)
    duration = round(rng.uniform(20, 900), 2)
    return SampleRecord(
        run_id=run_id,
        track="frontiermath",
        task_id=task_id,
        trial=trial,
        model=model,
        subject=SUBJECTS[(index // 2) % len(SUBJECTS)],
        outcome=outcome,
        score=1.0 if outcome == Outcome.CORRECT else 0.0,
        success=outcome == Outcome.CORRECT,
        error=error,
        input_tokens=sum(t.input_tokens for t in turns),
        output_tokens=sum(t.output_tokens for t in turns),
        reasoning_tokens=sum(t.reasoning_tokens for t in turns),
        total_tokens=last.cumulative_tokens,
        turns=turns,
        forced_submission_turn=forced_turn,
        cap_reached=cap_reached,
        transcript=transcript,
        tool_calls=tool_calls,
        submission=submission,
        reference=reference,
        sandbox_image=IMAGE_ID,
        started_at=started.isoformat(),
        finished_at=(started + timedelta(seconds=duration)).isoformat(),
        duration_s=duration,
    )


def make_judged_sample(
    rng: random.Random, index: int, *, run_id: str, model: str, track: str = "frontierscience-olympiad"
) -> SampleRecord:
    roll = rng.random()
    if roll < 0.1:
        outcome, verdict, parse_error = Outcome.JUDGE_ERROR, None, "no VERDICT line in the last line"
        replies = ["The answer looks plausible but I cannot decide.", f"Still unsure {XSS_TEXT}"]
    elif roll < 0.6:
        outcome, verdict, parse_error = Outcome.CORRECT, "CORRECT", None
        replies = ["The attempted answer 3.2 J matches the reference 3.2 J.\nVERDICT: CORRECT"]
    else:
        outcome, verdict, parse_error = Outcome.INCORRECT, "INCORRECT", None
        replies = ["The attempted answer differs by a factor of 2.\nVERDICT: INCORRECT"]
    total = rng.randint(800, 5000)
    started = START + timedelta(seconds=index * 3)
    problem = "A block of mass 2 kg slides ... What energy is dissipated?"
    answer = f"The dissipated energy is \\(3.2\\,\\mathrm{{J}}\\). {XSS_TEXT}"
    reference = f"3.2\\,\\mathrm{{J}} {XSS_TEXT}"
    prompt = JUDGE_TEMPLATE.format(problem=problem, answer=answer, reference=reference)
    return SampleRecord(
        run_id=run_id,
        track=track,
        task_id=f"fs-{index:03d}",
        trial=0,
        model=model,
        subject=rng.choice(("physics", "chemistry", "biology")),
        outcome=outcome,
        score=1.0 if outcome == Outcome.CORRECT else 0.0,
        success=outcome == Outcome.CORRECT,
        input_tokens=total // 3,
        output_tokens=total - total // 3,
        total_tokens=total,
        turns=[
            TurnUsage(
                turn=1, input_tokens=total // 3, output_tokens=total - total // 3, cumulative_tokens=total
            )
        ],
        transcript=[{"role": "user", "content": problem}, {"role": "assistant", "content": answer}],
        reference=ReferenceRecord(kind="answer", text=reference),
        judge=JudgeRecord(
            decided_by="judge",
            model="openai/judge",
            prompt=prompt,
            prompt_chars=len(prompt),
            prompt_sha256=text_sha256(prompt),
            input_tokens=len(prompt) // 4 * len(replies),
            output_tokens=40 * len(replies),
            replies=replies,
            verdict=verdict,
            parse_error=parse_error,
        ),
        eed=EEDRecord(
            score=round(rng.uniform(0, 100), 1),
            relative_distance=0.3,
            distance=3.0,
            reference_size=10,
            answer_size=12,
            extracted_answer="3.2\\,J",
        ),
        started_at=started.isoformat(),
        finished_at=(started + timedelta(seconds=12)).isoformat(),
        duration_s=12.0,
    )


def header(
    run_id: str,
    models: list[str],
    *,
    track: str,
    force_at: int,
    cap: int,
    backend: str,
    samples: list[SampleRecord],
    prices: bool = True,
    judge: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A run.json laid out as proctor.agent.run.runner writes it."""
    model_configs = []
    for name in models:
        config: dict[str, Any] = {"name": name, "reasoning_effort": "high"}
        if prices:
            config.update(input_price_per_mtok=1.25, output_price_per_mtok=10.0)
        model_configs.append(config)
    end = max((s.finished_at for s in samples), default=START.isoformat())
    if backend == "docker":
        sandbox: dict[str, Any] = {
            "backend": "docker",
            "image": "proctor/frontiermath-python:abc123",
            "image_id": IMAGE_ID,
            "isolation": "container",
        }
    else:
        sandbox = {
            "backend": "local",
            "image": None,
            "image_id": None,
            "python_version": "3.11.7",
            "isolation": "reduced",
            "fallback_reason": "no Docker engine answered",
        }
    return {
        "run_id": run_id,
        "track": track,
        "status": "finished",
        "created_at": START.isoformat(),
        "config": {
            "track": track,
            "tasks": "configs/tasks/sample.jsonl",
            "models": model_configs,
            "trials": 2,
            "budget": {"token_cap": cap, "force_submit_at": force_at},
            "sandbox": {"backend": backend},
            "judge": judge,
        },
        "models": [
            {"label": name, "name": name, "reasoning_effort": "high", "api": "chat"} for name in models
        ],
        "sessions": [{"started_at": START.isoformat(), "ended_at": end, "status": "finished"}],
        "versions": {"proctor": "0.1.0", "python": "3.11.7", "openai": "1.60.0"},
        "sandbox": sandbox,
        "sandbox_isolates_less": backend != "docker",
        "started_at": START.isoformat(),
        "ended_at": end,
        "samples_planned": len(samples),
    }


def write_run(run_dir: Path, samples: list[SampleRecord], head: dict[str, Any]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "samples.jsonl").open("w", encoding="utf-8") as out:
        for sample in samples:
            out.write(sample.model_dump_json() + "\n")
    (run_dir / "run.json").write_text(json.dumps(head, indent=2), encoding="utf-8")
    (run_dir / "summary.json").write_text(json.dumps({"run_id": head["run_id"]}), encoding="utf-8")
    return run_dir


def make_frontiermath_run(
    run_dir: Path,
    n_samples: int,
    *,
    seed: int = 7,
    force_at: int = 660_000,
    cap: int = 1_000_000,
    models: tuple[str, ...] = ("openai/gpt-test",),
    backend: str = "docker",
    turns_hint: int = 12,
    output_chars: int = 600,
    run_id: str = "run-test",
) -> Path:
    rng = random.Random(seed)
    samples = [
        make_frontiermath_sample(
            rng,
            i,
            run_id=run_id,
            model=model,
            force_at=force_at,
            cap=cap,
            turns_hint=turns_hint,
            output_chars=output_chars,
        )
        for model in models
        for i in range(n_samples // len(models))
    ]
    return write_run(
        run_dir,
        samples,
        header(
            run_id,
            list(models),
            track="frontiermath",
            force_at=force_at,
            cap=cap,
            backend=backend,
            samples=samples,
        ),
    )


def make_judged_run(run_dir: Path, n_samples: int, *, seed: int = 11, run_id: str = "run-judged") -> Path:
    rng = random.Random(seed)
    samples = [make_judged_sample(rng, i, run_id=run_id, model="openai/gpt-test") for i in range(n_samples)]
    return write_run(
        run_dir,
        samples,
        header(
            run_id,
            ["openai/gpt-test"],
            track="frontierscience-olympiad",
            force_at=660_000,
            cap=1_000_000,
            backend="local",
            samples=samples,
            prices=False,
            judge={"name": "openai/judge", "reasoning_effort": "high"},
        ),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=30, help="typical turns per sample")
    args = parser.parse_args()
    make_frontiermath_run(args.out, args.samples, turns_hint=args.turns, output_chars=1500)
    print(args.out)


if __name__ == "__main__":
    main()
