"""What a kernel may not contain, said in the user's terms: the message of the
``CompileError`` for a Python statement or expression the frontend does not lower."""

from __future__ import annotations

import ast

_DESCRIPTIONS: dict[type[ast.AST], str] = {
    ast.FunctionDef: "a function defined inside a kernel or func is not supported; define it "
                     "at module level with @kd.func",
    ast.AsyncFunctionDef: "async functions are not supported in kernels",
    ast.ClassDef: "a class defined inside a kernel is not supported",
    ast.Lambda: "lambda is not supported in kernels; define a @kd.func at module level",
    ast.Try: "try/except is not supported in kernels",
    ast.With: "a with statement is not supported in kernels",
    ast.Raise: "raise is not supported in kernels; use assert (checked with debug=True)",
    ast.Global: "a global statement is not supported in kernels; write into a global array "
                "instead",
    ast.Nonlocal: "a nonlocal statement is not supported in kernels",
    ast.Import: "import is not supported inside kernels; import at module level",
    ast.ImportFrom: "import is not supported inside kernels; import at module level",
    ast.Delete: "del is not supported in kernels",
    ast.Match: "a match statement is not supported in kernels; use if/elif",
    ast.ListComp: "list comprehensions are not supported in kernels; fill an array "
                  "(kd.zeros) in a loop",
    ast.SetComp: "set comprehensions are not supported in kernels",
    ast.DictComp: "dict comprehensions are not supported in kernels",
    ast.GeneratorExp: "generator expressions are not supported in kernels; use a loop",
    ast.Dict: "dicts are not supported in kernels",
    ast.Set: "sets are not supported in kernels",
    ast.Yield: "yield is not supported in kernels",
    ast.YieldFrom: "yield is not supported in kernels",
    ast.Await: "await is not supported in kernels",
    ast.NamedExpr: "the walrus operator := is not supported in kernels; assign on a line "
                   "of its own",
    ast.Starred: "*-unpacking is not supported here",
    ast.Slice: "a slice is supported only on arrays (of a vector, take components: v.xy, "
               "kd.vec2(v[0], v[1]))",
}


def unsupported_message(node: ast.AST, kind: str) -> str:
    """The error message for ``node``, a statement or expression (``kind``) with no
    lowering."""
    description = _DESCRIPTIONS.get(type(node))
    if description is not None:
        return description
    return f"unsupported {kind}: {type(node).__name__}"
