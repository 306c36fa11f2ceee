"""Static checks of a submission before anything runs: the published submit_answer rules."""

from __future__ import annotations

import ast
import io
import tokenize

# Deepest syntax tree accepted, whatever this process's recursion limit is. Python's parser gives
# up at about three times the recursion limit (3,000 levels at the default), so whether deep code
# parsed depended on who had raised the limit in this process (hypothesis does): the same
# submission was a problem in one run and ran in another. Below the default's reach on purpose,
# so that anything accepted here also compiles in the sandbox's interpreter.
MAX_SYNTAX_DEPTH = 2000
TOO_DEEP = "it is nested too deeply for Python's parser"


class UnparseableCode(ValueError):
    """Source that Python's parser, or the depth bound, will not take (not a plain syntax error)."""


def parse_bounded(source: str, mode: str = "exec") -> ast.AST:
    """``ast.parse`` with a depth bound that does not depend on the recursion limit.

    Raises :class:`SyntaxError` for a syntax error and :class:`UnparseableCode` (one-line
    reason) for code nested too deeply or otherwise refused by the parser.
    """
    try:
        tree = ast.parse(source, mode=mode)
    except (RecursionError, MemoryError) as exc:
        raise UnparseableCode(TOO_DEEP) from exc
    except ValueError as exc:  # e.g. a NUL byte in the source
        raise UnparseableCode(str(exc) or type(exc).__name__) from exc
    if syntax_depth(tree) > MAX_SYNTAX_DEPTH:
        raise UnparseableCode(TOO_DEEP)
    return tree


def syntax_depth(tree: ast.AST) -> int:
    """The number of nodes on the longest root-to-leaf path, walked without recursion."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def check_submission_code(code: str) -> list[str]:
    """Problems with ``code`` as a submission; an empty list means it follows the rules.

    The rules: it parses, defines a top-level function ``answer`` taking no arguments,
    and contains no comments (found as COMMENT tokens, so '#' inside strings is fine).
    """
    try:
        tree = parse_bounded(code)
    except SyntaxError as exc:
        return [f"syntax error: {exc.msg} (line {exc.lineno})"]
    except UnparseableCode as exc:
        # Code nested a few thousand deep (3 KB of "-" is enough) is the code's problem, as a
        # syntax error is: it cannot run either. Raised, it would end the sample as a harness
        # error, which a model could use to abstain.
        return [f"the code cannot be parsed: {exc}"]
    assert isinstance(tree, ast.Module)
    problems = _answer_signature_problems(tree)
    problems.extend(_comment_problems(code))
    return problems


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
