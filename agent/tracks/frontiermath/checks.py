"""Static checks of a submission before anything runs: the published submit_answer rules."""

from __future__ import annotations

import ast
import io
import tokenize


def check_submission_code(code: str) -> list[str]:
    """Problems with ``code`` as a submission; an empty list means it follows the rules.

    The rules: it parses, defines a top-level function ``answer`` taking no arguments,
    and contains no comments (found as COMMENT tokens, so '#' inside strings is fine).
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"syntax error: {exc.msg} (line {exc.lineno})"]
    except (RecursionError, MemoryError, ValueError) as exc:
        # Python's parser gives up on an expression nested a few thousand deep (3 KB of "-" is
        # enough). That is the code's problem, as a syntax error is: it cannot run either. Raised,
        # it would end the sample as a harness error, which a model could use to abstain.
        return [f"the code cannot be parsed: {unparseable_reason(exc)}"]
    problems = _answer_signature_problems(tree)
    problems.extend(_comment_problems(code))
    return problems


def unparseable_reason(exc: BaseException) -> str:
    """Why Python's parser gave up on source that is not a plain syntax error."""
    if isinstance(exc, RecursionError | MemoryError):
        return "it is nested too deeply for Python's parser"
    return str(exc) or type(exc).__name__


def _answer_signature_problems(tree: ast.Module) -> list[str]:
    definitions = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "answer"
    ]
    if not definitions:
        return ["the code does not define a top-level function named 'answer'"]
    definition = definitions[-1]  # the last definition is the one that counts at run time
    if isinstance(definition, ast.AsyncFunctionDef):
        return ["'answer' must be a plain function, not 'async def'"]
    arguments = definition.args
    names = [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]
    if arguments.vararg is not None:
        names.append("*" + arguments.vararg.arg)
    if arguments.kwarg is not None:
        names.append("**" + arguments.kwarg.arg)
    if names:
        return [f"answer() must take no arguments, but it takes: {', '.join(names)}"]
    return []


def _comment_problems(code: str) -> list[str]:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        return [f"cannot tokenize the code: {exc}"]
    lines = sorted({token.start[0] for token in tokens if token.type == tokenize.COMMENT})
    if not lines:
        return []
    where = ", ".join(str(line) for line in lines[:10]) + (", ..." if len(lines) > 10 else "")
    return [
        f"the code contains comments (line{'s' if len(lines) > 1 else ''} {where}); comments are not allowed"
    ]
