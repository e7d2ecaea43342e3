"""Parsing a cell for the integrity scan: IPython lines (magics, ``!`` shell lines, ``np.exp?`` help)
become the Python they run, or ``pass``, and yield their own findings; then the cell is parsed with
``ast``. Trees nested deeper than the recursive scan can follow count as unparsable."""

from __future__ import annotations

import ast
import re

from .markup import active_content, markdown_active
from .rules import (
    CODE_MAGICS,
    DISPLAY_MAGICS,
    FILE_MAGICS,
    HARMLESS_MAGICS,
    HARMLESS_WITH,
    JS_MAGICS,
    PYTHON_MAGICS,
    SCRIPT,
    SHELL_MAGICS,
    hidden_place,
)

MAX_DEPTH = 150  # syntax-tree depth: honest cells stay far below; deeper ones would exhaust the stack

_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<esc>%%|%|!)(?P<name>\w*)(?P<rest>.*)$")
# files = !ls, t = %timeit -o f(x)
_ASSIGN_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<target>[\w.,\s\[\]]+?)\s*=\s*(?P<magic>[%!](?!=).*)$")
_HELP = re.compile(r"^(?P<indent>\s*)(\?+[\w.*]+|[\w.*]+\?+)\s*$")  # np.exp?, np.*exp*?
_OPTIONS = re.compile(r"^\s*(?:-(?:[nrpsTDl]\s+\S+|\w+)\s+)*")  # %timeit -n 10 -r 3, %prun -s cumulative
_WORDS = re.compile(r"[^\s'\"=;|&<>(),]+")  # the words of a shell line, any of which may be a path


def _ipython(esc: str, name: str, rest: str) -> tuple[list[tuple[str, str, str]], str]:
    """Findings (kind, detail, target) for one magic or shell line, and the Python it runs ("" if none)."""
    text, name, args = f"{esc}{name}{rest}".strip()[:60], name.lower(), rest.strip()
    if esc == "!" or name in SHELL_MAGICS:
        kind, detail = "shell", f"shell command: {text}"
    elif name in PYTHON_MAGICS:
        return [], "" if name == "capture" else _OPTIONS.sub("", rest).strip()
    elif name in JS_MAGICS:
        return [("javascript", f"{text}: Javascript for the browser", "")], ""
    elif name in HARMLESS_MAGICS | DISPLAY_MAGICS or args.startswith(HARMLESS_WITH.get(name, ())):
        return [], ""
    elif name in FILE_MAGICS | CODE_MAGICS:
        kind, detail = "file-access" if name in FILE_MAGICS else "dynamic-code", f"IPython magic: {text}"
    else:
        kind, detail = "magic", f"IPython magic: {text}"
    place = hidden_place(_WORDS.findall(name + rest if esc == "!" else rest))
    hidden = [("hidden-files", f"a path into {place}: {text}", place)] if place else []
    return [(kind, detail, "")] + hidden, ""


def _cell_magic(at: int, name: str, rest: str, body: list[str]) -> list[tuple[int, str, str, str]]:
    """Findings (line, kind, detail, target) for a cell run by a magic other than Python (%%bash, %%html)."""
    if name.lower() in DISPLAY_MAGICS:
        text = "\n".join(body)
        script = SCRIPT.search(text) or (markdown_active(text) if name.lower() == "markdown"
                                         else active_content(text))
        return [(at, "javascript", f"a %%{name} cell holding script for the browser", "")] if script else []
    found = [(at, *k) for k in _ipython("%%", name, rest)[0]]
    if name.lower() in SHELL_MAGICS:  # its body is commands: are they after a hidden place?
        for i, line in enumerate(body, at + 1):
            place = hidden_place(_WORDS.findall(line))
            if place:
                found.append((i, "hidden-files", f"a path into {place}: {line.strip()[:60]}", place))
    return found


def _first_line(name: str, rest: str) -> str:
    """The Python standing for the first line of a %%time, %%timeit, %%prun or %%capture cell."""
    if name == "capture":  # %%capture out --no-stderr binds out
        words = [w for w in rest.split() if not w.startswith("-")]
        return f"{words[0]} = None" if words and words[0].isidentifier() else "pass"
    return _OPTIONS.sub("", rest).strip() or "pass"  # %%timeit -n 10 setup = 1


def parse_cell(source: str) -> tuple[ast.Module | None, list[tuple[int, str, str, str]],
                                     tuple[int | None, str] | None]:
    """The syntax tree with IPython lines made Python, their findings (line, kind, detail, target),
    and an error (line, message)."""
    try:
        return _shallow(ast.parse(source)), [], None
    except SyntaxError:
        pass  # perhaps IPython syntax: a cell that parses as Python holds none, so strip only now
    except (ValueError, RecursionError, MemoryError) as err:
        return None, [], (None, _unparsable(err))
    lines, found = source.split("\n"), []
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    head = _MAGIC.match(lines[first]) if lines else None
    if head and head["esc"] == "%%":
        name = head["name"].lower()
        if name not in PYTHON_MAGICS:  # %%bash, %%javascript: not Python
            return ast.Module(body=[], type_ignores=[]), _cell_magic(first + 1, head["name"], head["rest"],
                                                                     lines[first + 1:]), None
        lines[first] = _first_line(name, head["rest"])
    for i, line in enumerate(lines):
        if head and head["esc"] == "%%" and i == first:
            continue  # made Python above
        magic, assign = _MAGIC.match(line), _ASSIGN_MAGIC.match(line)
        indent = re.match(r"\s*", line).group()
        if magic:
            kinds, python = _ipython(magic["esc"], magic["name"], magic["rest"])
            lines[i] = indent + (python or "pass")
        elif assign:  # files = !ls, t = %timeit -o f(x): the name is bound all the same
            m = _MAGIC.match(assign["magic"])
            kinds, python = _ipython(m["esc"], m["name"], m["rest"])
            lines[i] = indent + (python + "; " if python else "") + assign["target"].strip() + " = None"
        else:
            if _HELP.match(line):
                lines[i] = indent + "pass"
            continue
        found += [(i + 1, *k) for k in kinds]
    tree, error = parse_python("\n".join(lines))
    return tree, found, error


def parse_python(source: str) -> tuple[ast.Module | None, tuple[int | None, str] | None]:
    """The syntax tree of plain Python (no IPython lines), or None and the error (line, message)."""
    try:
        return _shallow(ast.parse(source)), None
    except SyntaxError as err:
        return None, (err.lineno, err.msg)
    except (ValueError, RecursionError, MemoryError) as err:
        return None, (None, _unparsable(err))


def _unparsable(err: Exception) -> str:
    return "nested too deeply to scan" if isinstance(err, RecursionError) else f"{type(err).__name__}: {err}"


def _shallow(tree: ast.Module) -> ast.Module:
    """The tree, or RecursionError if it nests deeper than the recursive scan can follow."""
    todo = [(tree, 0)]
    while todo:
        node, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise RecursionError("nested too deeply to scan")
        todo.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree
