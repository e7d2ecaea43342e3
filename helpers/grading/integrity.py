"""Static integrity scan of submitted notebooks: what a student changed that could fool the grading.

Nothing is executed. Every cell a student can edit (solution cells, cells they added, course
cells they changed) is parsed with ``ast`` and read against the released student notebook.
Locked cells are restored by nbgrader when it grades, so they are only compared.
Cells are named by grade_id, otherwise by 1-based position: "added cell 7", "cell 12".

The rule for severity (``SEVERITY`` is the one table of kinds): ``tamper`` is kept for evidence of
an attempt on the grading itself, and a class grader zeroes such a submission until the instructor
has looked. That is replacing what the checks compute or compare with (``monkeypatch``), rebinding
a check, ``np``/``torch``, a name the grade cells use or a builtin to another function or object
(``redefines-grader``), a path into the solutions, the gradebook, the grading folders, other
students' work, the exchange or home folders (``hidden-files``), the kernel's shell hooks, tracing
or stack frames (``kernel-hooks``), and Javascript for the grader's browser (``javascript``).
Everything else is ``review``: listed for a human, the score left alone — shell lines and unusual
magics, the network, ``exec`` and ``eval``, processes, ordinary files, duplicated grade ids, edited
or deleted locked cells, a solution that calls the reference, names rebound to plain data, cells
that do not parse. Everyday magics (``%matplotlib``, ``%autoreload``, ``%timeit``, ``np.exp?``) are
no finding at all; the Python after ``%time``/``%timeit`` and in ``%%time``, ``%%timeit`` and
``%%capture`` cells, and in ``exec`` of a literal string, is scanned like any other code.
"""

from __future__ import annotations

import ast
import builtins
import csv
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

import nbformat

SEVERITY = {
    "monkeypatch": "tamper",  # replaces or changes numpy, torch, a builtin or a check
    "redefines-grader": "tamper",  # rebinds a check, np/torch or a builtin to another function or object
    "hidden-files": "tamper",  # a path into solutions, the gradebook, grading folders or others' work
    "kernel-hooks": "tamper",  # the shell's hooks, tracing, the interpreter's stack frames
    "javascript": "tamper",  # script that would run in the grader's browser
    "shell": "review",  # !cmd, %pip, %%bash, files = !ls
    "magic": "review",  # a magic that is not an everyday one: %reset, %load_ext of another extension
    "network": "review",
    "dynamic-code": "review",
    "process": "review",
    "file-access": "review",
    "script-output": "review",  # a saved output holding script: nbgrader clears outputs before it grades
    "duplicate-grade-id": "review",
    "edited-locked-cell": "review",
    "deleted-grade-cell": "review",
    "shadows-name": "review",
    "uses-reference": "review",
    "syntax-error": "review",
    "unreadable": "review",
}

# Names the grade cells rely on, besides the checks the release's locked cells import.
GRADER_NAMES = {"quiet", "fresh_seeds", "reference", "CheckFailed"}
GRADER_PREFIXES = ("check_", "grade_", "expect_")
GRADER_MODULES = {"np": "numpy", "torch": "torch"}
BUILTIN_NAMES = {n for n in dir(builtins) if not n.startswith("_")} | {"__import__", "__build_class__"}
# Builtins beginners shadow by accident (`sum = 0`): worth a look, not an accusation.
NATURAL_NAMES = {"id", "input", "sum", "max", "min", "map", "filter", "format", "dir", "iter", "next", "hash",
                 "slice", "list", "dict", "set", "str", "tuple", "bytes", "pow", "divmod", "help", "license",
                 "copyright", "credits"}
# Builtins that make plain data: `type = str(x)` shadows a name, it replaces no function.
DATA_CALLS = {"str", "int", "float", "bool", "complex", "list", "dict", "tuple", "set", "frozenset", "sorted",
              "len", "range", "sum", "min", "max", "round", "abs", "zip", "enumerate", "repr", "format"}
DOC_DUNDERS = {"__doc__", "__name__", "__qualname__"}  # renaming or documenting patches nothing
# What the checks compare with: replacing one of these makes a wrong answer look right.
COMPARING = {"allclose", "isclose", "all", "any", "equal", "array_equal", "array_equiv", "testing",
             "assert_allclose", "assert_array_equal", "assert_array_almost_equal", "assert_equal", "isfinite",
             "isnan", "eq", "ne", "__eq__", "__ne__", "__bool__", "__len__", "__float__"}

NETWORK = {"socket", "urllib", "urllib3", "http", "requests", "httpx", "aiohttp", "ftplib", "smtplib",
           "poplib", "imaplib", "telnetlib", "xmlrpc", "ssl", "websocket", "websockets", "paramiko"}
PROCESS = {"os", "subprocess", "sys", "signal", "multiprocessing", "threading", "_thread", "concurrent",
           "ctypes", "resource", "pty", "atexit", "asyncio"}
PROCESS_USES = ("os._exit", "os.abort", "os.kill", "os.fork", "os.system", "os.popen", "os.exec", "os.spawn",
                "sys.exit", "sys.path", "subprocess.", "signal.", "multiprocessing.", "threading.",
                "ctypes.")  # prefixes of uses worth pointing at
FILES = {"shutil", "glob", "pickle", "pathlib", "tempfile", "fileinput", "zipfile", "tarfile", "sqlite3",
         "shelve", "dbm", "marshal", "io", "joblib"}
OS_FILES = {"listdir", "scandir", "walk", "remove", "unlink", "rmdir", "removedirs", "rename", "replace",
            "makedirs", "mkdir", "chdir", "chmod", "chown", "symlink", "link", "open", "truncate"}
PATH_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "iterdir", "rglob", "unlink", "rmdir",
                "touch", "symlink_to", "hardlink_to"}
PATH_VERBS = PATH_METHODS | {"joinpath", "open", "exists", "is_file", "is_dir", "glob", "stat", "savefig",
                             "tofile"}  # methods whose receiver and arguments are paths
PATH_MODULES = {"os", "posixpath", "ntpath", "pathlib", "shutil", "glob", "subprocess", "sqlite3", "io",
                "zipfile", "tarfile", "fileinput", "runpy"}  # any string passed to their calls may be a path
SAVE_LOAD = {"numpy.save": 0, "numpy.savez": 0, "numpy.savez_compressed": 0, "numpy.savetxt": 0,
             "numpy.load": 0, "numpy.loadtxt": 0, "numpy.genfromtxt": 0, "numpy.fromfile": 0,
             "numpy.memmap": 0, "torch.save": 1, "torch.load": 0}  # -> position of the path argument
PATH_KEYWORDS = ("file", "fname", "f", "filename", "path")
# Places a submission has no business reading or writing, by folder name -> in a student's words;
# the first that a path names is the one reported.
HIDDEN_DIRS = {"solutions": "the course's solutions", "source_with_tests": "the instructor's notebooks",
               "submitted": "other students' work", "autograded": "other students' work",
               "exchange": "the course's exchange folder", "grading": "the grading folder"}
HIDDEN_ROOTS = {"root": "the grading machine's home folders", "home": "the grading machine's home folders"}
MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "append", "insert", "extend", "remove",
            "__setitem__", "__delitem__"}
DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__"}
FRAME_PATHS = {"sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes",
               "gc.get_referrers", "gc.get_objects"}  # reach the grader's objects through the interpreter
KERNEL_PATHS = tuple(FRAME_PATHS | {"sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.monitoring",
                                    "sys._current_frames", "threading.settrace", "threading.setprofile",
                                    "inspect.trace", "inspect.getinnerframes", "gc.get_referents"})
CODE_PATHS = ("pickle.loads", "marshal.loads", "types.FunctionType", "types.CodeType", "runpy.", "code.")
FRAME_ATTRS = {"f_globals", "f_locals", "f_builtins", "f_back", "gi_frame", "tb_frame", "cr_frame"}
# The shell's hooks, flagged on any object; on get_ipython() every attribute but SHELL_CALLS is.
SHELL_ATTRS = {"set_custom_exc", "showtraceback", "showsyntaxerror", "run_cell", "run_cell_async", "run_code",
               "run_ast_nodes", "user_ns", "user_global_ns", "register_magic_function", "register_magics",
               "set_hook", "input_transformers_post", "input_transformers_cleanup", "ast_transformers",
               "custom_exceptions", "InteractiveTB"}
SHELL_CALLS = {"run_line_magic": "%{0} {1}", "magic": "%{0}", "run_cell_magic": "%%{0} {1}\n{2}",
               "system": "!{0}", "getoutput": "!{0}", "system_piped": "!{0}", "system_raw": "!{0}"}
JS_NAMES = {"Javascript", "display_javascript"}
# Settings students change honestly; writing them patches nothing the grading reads.
ALLOWED_WRITES = ("matplotlib.rcParams", "matplotlib.pyplot.rcParams", "torch.backends.", "os.environ",
                  "pandas.options.", "IPython.core.interactiveshell.InteractiveShell.ast_node_interactivity")

# IPython lines, by magic name (lower case). Everyday ones are no finding; the rest are reviewed.
HARMLESS_MAGICS = {"matplotlib", "autoreload", "aimport", "precision", "who", "whos", "who_ls", "env", "pwd",
                   "pinfo", "pinfo2", "pdoc", "pdef", "psource", "lsmagic", "magic", "quickref", "history",
                   "xmode", "colors"}
HARMLESS_WITH = {"load_ext": "autoreload", "reload_ext": "autoreload", "config": "InlineBackend"}
PYTHON_MAGICS = {"time", "timeit", "prun", "capture"}  # no finding: the statement or cell body is scanned
DISPLAY_MAGICS = {"html", "svg", "markdown", "latex"}  # no finding unless they hold script
JS_MAGICS = {"javascript", "js"}
SHELL_MAGICS = {"sx", "system", "sc", "pip", "conda", "mamba", "bash", "sh", "script", "python", "python2",
                "python3", "pypy", "perl", "ruby", "alias", "ls", "ll", "lf", "lk", "lx", "ldir", "cat", "cp",
                "mv", "rm", "rmdir", "mkdir", "less", "more", "man", "clear"}
FILE_MAGICS = {"cd", "pushd", "popd", "dhist", "bookmark", "writefile", "file", "load", "save", "pycat",
               "pfile", "store", "logstart"}
CODE_MAGICS = {"run", "debug", "macro", "rerun", "recall", "edit"}  # run code the scan cannot see
MAX_DEPTH = 150  # syntax-tree depth: honest cells stay far below; deeper ones would exhaust the stack

_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<esc>%%|%|!)(?P<name>\w*)(?P<rest>.*)$")
# files = !ls, t = %timeit -o f(x)
_ASSIGN_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<target>[\w.,\s\[\]]+?)\s*=\s*(?P<magic>[%!](?!=).*)$")
_HELP = re.compile(r"^(?P<indent>\s*)(\?+[\w.*]+|[\w.*]+\?+)\s*$")  # np.exp?, np.*exp*?
_OPTIONS = re.compile(r"^\s*(?:-(?:[nrpsTDl]\s+\S+|\w+)\s+)*")  # %timeit -n 10 -r 3, %prun -s cumulative
_SCRIPT = re.compile(r"<script|javascript:|application/javascript|<[^>]*\son[a-z]+\s*=", re.I)
_WORDS = re.compile(r"[^\s'\"=;|&<>(),]+")  # the words of a shell line, any of which may be a path


@dataclass(frozen=True)
class Finding:
    """One thing a reviewer should see: where, what kind, how serious, in words.

    ``target`` names what was touched (numpy.allclose, check_softmax, the course's solutions) for
    the student's explanation; it is not compared.
    """

    cell: str
    line: int | None
    kind: str
    severity: str
    detail: str
    target: str = field(default="", compare=False)


# ------------------------------------------------------------------ parsing cells


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _norm(text: str) -> str:
    return "".join(text.split())  # `f( x )` and `f(x)` are the same cell


def _grade_id(cell) -> str | None:
    return (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") or None


def _place(text: str) -> str | None:
    """Which hidden place of the grading machine a path names, in words, or None."""
    parts = [p.lower() for p in text.replace("\\", "/").split("/")]
    if any(p.startswith("gradebook") for p in parts):
        return "the gradebook"
    named = next((words for folder, words in HIDDEN_DIRS.items() if folder in parts), None)  # most telling
    if named is None and len(parts) > 1 and parts[0] == "" and parts[1] in HIDDEN_ROOTS:
        return HIDDEN_ROOTS[parts[1]]
    return named


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
    place = next(filter(None, map(_place, _WORDS.findall(name + rest if esc == "!" else rest))), None)
    hidden = [("hidden-files", f"a path into {place}: {text}", place)] if place else []
    return [(kind, detail, "")] + hidden, ""


def _cell_magic(at: int, name: str, rest: str, body: list[str]) -> list[tuple[int, str, str, str]]:
    """Findings (line, kind, detail, target) for a cell run by a magic other than Python (%%bash, %%html)."""
    if name.lower() in DISPLAY_MAGICS:
        script = _SCRIPT.search("\n".join(body))
        return [(at, "javascript", f"a %%{name} cell holding script for the browser", "")] if script else []
    found = [(at, *k) for k in _ipython("%%", name, rest)[0]]
    if name.lower() in SHELL_MAGICS:  # its body is commands: are they after a hidden place?
        for i, line in enumerate(body, at + 1):
            place = next(filter(None, map(_place, _WORDS.findall(line))), None)
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
    try:
        return _shallow(ast.parse("\n".join(lines))), found, None
    except SyntaxError as err:
        return None, found, (err.lineno, err.msg)
    except (ValueError, RecursionError, MemoryError) as err:
        return None, found, (None, _unparsable(err))


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


# ------------------------------------------------------------------ what names mean


def _imports(tree: ast.AST):
    """(bound name, dotted path it is bound to, module imported) for every import in the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                yield (a.asname, a.name, a.name) if a.asname else (top, top, a.name)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                path = "." * node.level + f"{node.module or ''}.{a.name}"
                if a.name != "*":
                    yield a.asname or a.name, path, path


def _bound(tree: ast.AST) -> set[str]:
    """Every name the tree binds other than by import, in any scope."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _pairs(tree: ast.AST):
    """(name, expression) pairs through which a name may come to stand for a module."""
    def split(target, value):
        if isinstance(target, ast.Name) and isinstance(value, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            # a container holding a module by name counts as one (cfg = {"m": np}); {"exp": np.exp} does not
            items = value.values if isinstance(value, ast.Dict) else value.elts
            yield from ((target.id, v) for v in items if isinstance(v, ast.Name))
        elif isinstance(target, ast.Name):
            yield target.id, value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value] * len(target.elts)
            for t, v in zip(target.elts, values):
                yield from split(t, v)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                yield from split(t, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            yield from split(node.target, node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):  # for m in (np, torch), for m in mods
            literal = isinstance(node.iter, (ast.Tuple, ast.List, ast.Set))
            for elt in node.iter.elts if literal else [node.iter]:
                yield from split(node.target, elt)
        elif isinstance(node, ast.arguments):  # def f(m=np)
            params = node.posonlyargs + node.args
            yield from ((a.arg, d) for a, d in zip(params[len(params) - len(node.defaults):], node.defaults))


def _written_params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[int | str, str]:
    """Parameters whose attributes or items the function assigns: {position and name: parameter}."""
    params, hit = [a.arg for a in fn.args.posonlyargs + fn.args.args], set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.Delete, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            hit |= {_name(_root(t)) for t in targets if isinstance(t, (ast.Attribute, ast.Subscript))}
        elif isinstance(node, ast.Call) and _name(node.func) in ("setattr", "delattr") and node.args:
            hit.add(_name(node.args[0]))
    return {key: p for i, p in enumerate(params) if p in hit for key in (i, p)}


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _snippet(node: ast.AST, width: int = 60) -> str:
    text = ast.unparse(node).split("\n")[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4 and name not in DOC_DUNDERS


@dataclass
class Namespace:
    """What names mean when the grade cells run: the release's imports and the student's objects."""

    modules: dict[str, str] = field(default_factory=dict)  # name -> the dotted path it stands for
    expected: dict[str, str] = field(default_factory=dict)  # what the release binds its imports to
    grader: set[str] = field(default_factory=set)  # rebinding these fools the grading
    setup: set[str] = field(default_factory=set)  # other names the locked cells bind
    made: set[str] = field(default_factory=set)  # names bound in cells students can edit
    writers: dict[str, dict[int | str, str]] = field(default_factory=dict)  # functions patching an argument
    returners: set[str] = field(default_factory=set)  # student functions that return a module
    rebound: set[str] = field(default_factory=set)  # names made plain objects so far in the notebook
    values: dict[str, list[ast.AST]] = field(default_factory=dict)  # what the student assigns to each name
    texts: dict[str, list[str]] = field(default_factory=dict)  # the strings each name may hold

    @classmethod
    def build(cls, locked: list[ast.Module], student: list[ast.Module]) -> Namespace:
        ns = cls()
        for tree in locked:
            for name, path, _ in _imports(tree):
                ns.expected[name] = ns.modules[name] = path
                if name.startswith(GRADER_PREFIXES) or path.startswith(("helpers.checks", "helpers.quiz")):
                    ns.grader.add(name)
            ns.setup |= _bound(tree)
        for name, path in GRADER_MODULES.items():
            ns.expected.setdefault(name, path)
            ns.modules.setdefault(name, path)
        ns.grader |= GRADER_NAMES | set(GRADER_MODULES)
        ns.setup = (ns.setup | set(ns.expected)) - ns.grader
        pairs = [p for tree in locked for p in _pairs(tree)]
        for tree in student:
            ns.modules.update((name, path) for name, path, _ in _imports(tree))
            ns.made |= _bound(tree)
            pairs += list(_pairs(tree))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        if isinstance(t, ast.Name):
                            ns.values.setdefault(t.id, []).append(node.value)
                elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                    ns.values.setdefault(node.target.id, []).append(node.iter)
        changed = True
        while changed:  # t = np; u = t.testing: follow aliases until nothing new
            changed = False
            for name, value in pairs:
                path = ns.path(value)
                if path and name not in ns.modules:
                    ns.modules[name], changed = path, True
        nodes = [n for tree in student for n in ast.walk(tree)]
        methods = {id(f) for c in nodes if isinstance(c, ast.ClassDef) for f in c.body}
        for fn in (n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            if id(fn) not in methods and _written_params(fn):
                ns.writers[fn.name] = _written_params(fn)
            if any(isinstance(r, ast.Return) and ns.path(r.value) for r in ast.walk(fn)):
                ns.returners.add(fn.name)
        ns.returners |= {n for n, value in pairs if isinstance(value, ast.Lambda) and ns.path(value.body)}
        return ns

    def path(self, node: ast.AST | None) -> str | None:
        """The dotted path of the module (or module attribute) this expression denotes, or None."""
        if isinstance(node, ast.Name):
            if node.id in self.rebound:
                return None
            return "builtins" if node.id == "__builtins__" else self.modules.get(node.id)
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            base = self.path(node.value)
            return None if base is None else f"{base}.{node.attr}" if isinstance(node, ast.Attribute) \
                else f"{base}[...]"
        if not isinstance(node, ast.Call):
            return None
        fn, args = _name(node.func), node.args
        if fn in ("globals", "locals", "vars"):
            return f"vars({self.path(args[0]) or _snippet(args[0], 20)})" if args else f"{fn}()"
        if fn == "getattr" and args and self.path(args[0]):
            attr = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else "?"
            return f"{self.path(args[0])}.{attr}"
        if fn == "type" and args and any(self.path(n) for n in ast.walk(args[0])):
            return f"type({_snippet(args[0], 20)})"  # the class of a library object, e.g. torch.Tensor
        called = fn if fn == "__import__" else self.path(node.func)
        if called in ("__import__", "importlib.import_module") and args and isinstance(args[0], ast.Constant):
            return str(args[0].value)
        if (fn == "get_ipython" and fn not in self.made) or (called or "").endswith(".get_ipython"):
            return "get_ipython()"  # the kernel's shell
        return called + "()" if called in FRAME_PATHS else None

    def strings(self, node: ast.AST, into_calls: bool = True) -> list[str]:
        """The string constants in an expression, in order, and those the names in it were assigned;
        without ``into_calls``, not those inside the calls it holds."""
        out, todo = [], [node]
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.append(n.value)
            elif isinstance(n, ast.Name):
                out += self.named(n.id)
            if into_calls or not isinstance(n, ast.Call):
                todo.extend(reversed(list(ast.iter_child_nodes(n))))
        return out

    def named(self, name: str) -> list[str]:
        """The string constants that may reach ``name`` through the student's assignments."""
        if name not in self.texts:
            todo, seen, out = list(self.values.get(name, [])), {name}, []
            while todo:  # a loop, not recursion: a chain of thousands of assignments is fine
                for n in ast.walk(todo.pop()):
                    if isinstance(n, ast.Constant) and isinstance(n.value, str):
                        out.append(n.value)
                    elif isinstance(n, ast.Name) and n.id not in seen:
                        seen.add(n.id)
                        todo += self.values.get(n.id, [])
            self.texts[name] = out
        return self.texts[name]

    def library_call(self, node: ast.AST) -> bool:
        """Whether this calls numpy, torch or matplotlib on plain arguments: a new plain object."""
        if not isinstance(node, ast.Call) or self.path(node) is not None:
            return False
        called = self.path(node.func)
        return called is not None and called.split(".")[0] in ("numpy", "torch", "matplotlib") and not any(
            self.path(a) for a in node.args if isinstance(a, (ast.Name, ast.Attribute)))

    def fresh(self, node: ast.AST) -> bool:
        """Whether an expression certainly makes a new plain object (an array, a number, a string)."""
        if isinstance(node, (ast.Constant, ast.JoinedStr, ast.Compare)):
            return True
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return all(self.fresh(e) for e in node.elts)
        if isinstance(node, ast.BinOp):
            return self.fresh(node.left) and self.fresh(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.fresh(node.operand)
        return self.library_call(node)

    def data(self, node: ast.AST | None) -> bool:
        """Whether an expression makes plain data (a literal, arithmetic, an array), never a function."""
        if isinstance(node, (ast.Constant, ast.JoinedStr, ast.Compare, ast.BinOp, ast.UnaryOp, ast.List,
                             ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            return True  # a container is never callable, whatever it holds
        if isinstance(node, ast.Subscript):
            return self.path(node) is None  # row["type"], not vars(builtins)["len"]
        fn = _name(node.func) if isinstance(node, ast.Call) else None
        return self.library_call(node) or (fn in DATA_CALLS and fn not in self.made)

    def may_be_module(self, node: ast.AST) -> bool:
        """Whether an expression other than a plain name may evaluate to a module."""
        if not isinstance(node, ast.Call):
            return any(self.path(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)))
        func, root = node.func, _root(node.func)
        own = isinstance(root, ast.Name) and root.id in self.made and not self.path(func)
        if self.library_call(node) or (own and _name(func) not in self.returners):
            return False  # np.zeros(3), torch.nn.Linear(2, 2), the student's own function or method
        return not (_name(func) == "type" and self.path(node) is None)  # type(self) is the student's class


# ------------------------------------------------------------------ scanning one cell


class _CellScan(ast.NodeVisitor):
    """Collects (line, kind, detail) for one cell's code."""

    def __init__(self, ns: Namespace):
        self.ns = ns
        self.found: dict[tuple[int | None, str, str], str] = {}  # -> target; ordered, without repeats
        self.scopes: list[set[str]] = []  # names declared `global` in each enclosing function or class
        self.top: set[int] = set()  # the cell's unconditional top-level statements
        self.calls: set[int] = set()  # functions in call position (setattr(...), not f = setattr)
        self.pathed: set[int] = set()  # nodes already read for a path, as part of an outer call

    def emit(self, node: ast.AST, kind: str, detail: str, target: str = "") -> None:
        self.found.setdefault((getattr(node, "lineno", None), kind, detail), target)

    def inline(self, tree: ast.Module, at: ast.AST) -> None:
        """Scan code a call runs from a literal string (exec, run_line_magic) as if it stood at ``at``."""
        for n in ast.walk(tree):
            if "lineno" in n._attributes:
                n.lineno = getattr(at, "lineno", None)
        for stmt in tree.body:
            self.visit(stmt)

    # -------------------------------------------------- names bound and objects written

    def bind(self, name: str, node: ast.AST, got: str | None, how: str, plain: bool = False) -> None:
        """A name bound at module level (to ``got``, if a module; to data, if ``plain``): does it
        replace one the grading uses? Plain data cannot make a check pass, only break it."""
        if self.scopes and name not in self.scopes[-1]:
            return  # a function's or class's own names cannot shadow the notebook's
        want = self.ns.expected.get(name)
        if want is not None and got == want:
            return  # `import numpy as np` again
        kind = "shadows-name" if plain else "redefines-grader"
        if name in GRADER_MODULES:
            self.emit(node, kind, f"rebinds {name} to something other than {want} ({how})", name)
        elif name in self.ns.grader:
            self.emit(node, kind, f"rebinds {name}, which the grade cells use ({how})", name)
        elif name in BUILTIN_NAMES:
            kind = "shadows-name" if name in NATURAL_NAMES else kind
            self.emit(node, kind, f"rebinds the builtin {name} ({how})", name)
        elif name in self.ns.setup:
            self.emit(node, "shadows-name", f"rebinds {name}, defined by the lesson's setup ({how})")
        elif name.startswith(GRADER_PREFIXES):
            self.emit(node, "shadows-name", f"defines {name}, named like the course's checks ({how})")

    def target(self, t: ast.AST, value: ast.AST | None, verb: str, how: str) -> None:
        if isinstance(t, ast.Name):  # a loop variable, or unpacked from a call: data as far as we know
            self.bind(t.id, t, self.ns.path(value), how, value is None or self.ns.data(value))
        elif isinstance(t, (ast.Tuple, ast.List)):
            same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(t.elts)
            for sub, v in zip(t.elts, value.elts if same else [None] * len(t.elts)):
                self.target(sub, v, verb, how)
        elif isinstance(t, ast.Starred):
            self.target(t.value, None, verb, how)
        elif isinstance(t, (ast.Attribute, ast.Subscript)):
            self.write(t, verb, how)

    def write(self, t: ast.Attribute | ast.Subscript, verb: str, how: str) -> None:
        """An attribute or item assignment: fine on the student's own objects, patching otherwise."""
        path, root = self.ns.path(t), _root(t)
        dunders = [n.attr for n in ast.walk(t) if isinstance(n, ast.Attribute) and _dunder(n.attr)]
        shown = path if path and "[" not in path else _snippet(t, 40)
        if path and not path.startswith(ALLOWED_WRITES):
            self.emit(t, "monkeypatch", f"{verb} {path} ({how})", shown)
        elif dunders:
            self.emit(t, "monkeypatch", f"{verb} {dunders[0]} of {_snippet(t.value, 30)} ({how})", shown)
        elif isinstance(root, ast.Name) and root.id not in self.ns.made and not path:
            self.emit(t, "monkeypatch", f"{verb} {_snippet(t, 40)}, but {root.id} is no object the student "
                                        f"created ({how})", shown)
        elif not isinstance(root, ast.Name) and self.ns.may_be_module(root):
            # (lambda: np)().allclose = f, [np][0].allclose = f
            self.emit(t, "monkeypatch", f"{verb} {_snippet(t, 40)}, on what may be a module ({how})", shown)

    def visit_Module(self, node: ast.Module) -> None:
        self.top = {id(stmt) for stmt in node.body}
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.target(t, node.value, "assigns", _snippet(node))
        self.generic_visit(node)
        if id(node) in self.top:  # `F = np.zeros(3)` run unconditionally: from here on F is the student's
            for name in (t.id for t in node.targets if isinstance(t, ast.Name)):
                if self.ns.fresh(node.value):
                    self.ns.rebound.add(name)
                else:
                    self.ns.rebound.discard(name)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.target(node.target, node.value, "assigns", _snippet(node))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.target(node.target, None, "changes", _snippet(node))
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.target(t, None, "deletes", _snippet(node))
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.target(node.target, None, "binds", f"for {_snippet(node.target, 30)} in ...")
        self.generic_visit(node)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.target(item.optional_vars, None, "binds", _snippet(item))
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.bind(node.target.id, node, self.ns.path(node.value), _snippet(node), self.ns.data(node.value))
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, node, None, f"except ... as {node.name}", plain=True)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        is_class = isinstance(node, ast.ClassDef)
        self.bind(node.name, node, None, f"{'class' if is_class else 'def'} {node.name}")
        outer = node.decorator_list + (node.bases + node.keywords if is_class else
                                       node.args.defaults + [d for d in node.args.kw_defaults if d])
        for child in outer:
            self.visit(child)
        self.scopes.append({n for s in node.body for g in ast.walk(s) if isinstance(g, ast.Global)
                            for n in g.names})
        for stmt in node.body:
            self.visit(stmt)
        self.scopes.pop()

    visit_AsyncFor, visit_AsyncWith = visit_For, visit_With
    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.scopes.append(set())
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for name, path, module in _imports(node):
            plain = path.split(".")[-1] == name  # from numpy import abs: the same function, not a fake
            self.bind(name, node, path, _snippet(node), plain)
            if module.split(".")[0] == "helpers":
                self.emit(node, "uses-reference", f"imports {module} from the course's helpers")
            self.categorise(node, module, f"imports {module}", imported=True)
        if any(a.name == "*" for a in node.names):
            self.emit(node, "shadows-name", f"{_snippet(node)} may shadow any name the grading uses")

    visit_ImportFrom = visit_Import

    # -------------------------------------------------- names and modules used

    def categorise(self, node: ast.AST, path: str, what: str, imported: bool = False) -> None:
        """Findings that follow from which module, or module attribute, is imported or used."""
        top, last = path.split(".")[0], path.split(".")[-1]
        if top in NETWORK or path in ("asyncio.open_connection", "asyncio.start_server"):
            self.emit(node, "network", what)
        if (imported and top in PROCESS) or path.startswith(PROCESS_USES):
            self.emit(node, "process", what)
        if top in FILES or (top == "os" and last in OS_FILES):
            self.emit(node, "file-access", what)
        if top in ("importlib", "runpy") or path.startswith(CODE_PATHS) \
                or path in {f"builtins.{n}" for n in DYNAMIC_NAMES}:
            self.emit(node, "dynamic-code", what)
        if path.startswith(KERNEL_PATHS) or top == "ipykernel":
            self.emit(node, "kernel-hooks", what, path.split("(")[0])
        if path.startswith("get_ipython()."):  # get_ipython() alone, or its class, is harmless
            attr = re.match(r"\w*", path[len("get_ipython()."):]).group()
            if attr not in SHELL_CALLS and attr != "__class__":  # those calls are read like magics
                self.emit(node, "kernel-hooks", f"{what}, the kernel's shell", attr)
        if top == "mock" or path.startswith("unittest.mock"):
            self.emit(node, "monkeypatch", what + " (a patching tool)", "library functions (unittest.mock)")
        if last in JS_NAMES:
            self.emit(node, "javascript", what)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if node.id in JS_NAMES:
            self.emit(node, "javascript", f"displays Javascript ({node.id})")
        elif node.id in DYNAMIC_NAMES and node.id not in self.ns.made:
            self.emit(node, "dynamic-code", f"uses {node.id}")
        elif node.id == "reference":
            self.emit(node, "uses-reference", "uses reference, the course's implementation")
        elif node.id in ("setattr", "delattr") and id(node) not in self.calls and node.id not in self.ns.made:
            # f = setattr; f(np, ...) or functools.partial(setattr, np): what it patches is out of sight
            self.emit(node, "monkeypatch", f"passes {node.id} around as a value")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        path = self.ns.path(node) if isinstance(node.ctx, ast.Load) else None
        if node.attr in SHELL_ATTRS and path is None:
            self.emit(node, "kernel-hooks", f"uses the shell's {node.attr}", node.attr)
        if node.attr in FRAME_ATTRS:
            self.emit(node, "kernel-hooks", f"reads the interpreter's stack frames ({node.attr})", node.attr)
        if path is None:
            self.generic_visit(node)
            return
        ref = self.ns.expected.get("reference")
        if _name(_root(node)) == "reference" or (ref and path.startswith(ref + ".")):
            self.emit(node, "uses-reference", f"uses {_snippet(node, 40)}, the course's implementation")
        self.categorise(node, path, f"uses {path}")
        for child in ast.walk(node):  # calls inside the chain: getattr(np, name).x
            if isinstance(child, ast.Call):
                self.visit(child)

    def visit_Call(self, node: ast.Call) -> None:
        fn, args = _name(node.func), node.args
        self.calls.add(id(node.func))
        if fn in ("globals", "vars") and fn not in self.ns.made:
            self.emit(node, "dynamic-code", f"calls {fn}()")
        elif fn == "getattr" and len(args) > 1 and not isinstance(args[1], ast.Constant):
            self.emit(node, "dynamic-code", f"getattr with a computed name ({_snippet(node)})")
        elif fn in ("setattr", "delattr") and args:
            literal = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else ""
            owner, root = self.ns.path(args[0]), _root(args[0])
            foreign = isinstance(root, ast.Name) and root.id not in self.ns.made
            if owner or foreign or _dunder(str(literal)):
                what = owner or _snippet(args[0], 30)
                self.emit(node, "monkeypatch", f"{fn} on {what} ({_snippet(node)})",
                          f"{what}.{literal}" if literal else what)
        elif fn == "open" and fn not in self.ns.made:
            self.emit(node, "file-access", f"opens a file ({_snippet(node)})")
        elif fn in ("exit", "quit") and fn not in self.ns.made:
            self.emit(node, "process", f"calls {fn}(), which stops the kernel")
        elif fn in ("exec", "eval", "compile") and fn not in self.ns.made and args \
                and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            tree = _parse(args[0].value)
            if tree is not None:
                self.inline(tree, node)
        called = self.ns.path(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if method in SHELL_CALLS and (method.startswith("run_") or called == f"get_ipython().{method}"):
            self.ipython_call(node, method)
        if called in SAVE_LOAD or method in ("savefig", "tofile"):
            i = SAVE_LOAD.get(called, 0)
            where = args[i] if len(args) > i else next(
                (k.value for k in node.keywords if k.arg in PATH_KEYWORDS), None)
            if _outside_cwd(where):
                self.emit(node, "file-access", f"a file outside the notebook's folder ({_snippet(node)})")
        if method in PATH_METHODS:
            self.emit(node, "file-access", f"uses .{method}() ({_snippet(node)})")
        self.hidden(node, called, method)
        owner = self.ns.path(node.func.value) if method else None
        if method in ("__setattr__", "__delattr__") or (
                method in MUTATORS and owner and not owner.startswith(ALLOWED_WRITES + ("sys.path",))):
            what = owner or _snippet(node.func.value, 30)
            self.emit(node, "monkeypatch", f"changes {what} ({_snippet(node)})", what)
        params = self.ns.writers.get(fn, {}) if fn else \
            _written_params(node.func) if isinstance(node.func, ast.Lambda) else {}
        for key, arg in list(enumerate(args)) + [(k.arg, k.value) for k in node.keywords if k.arg]:
            if key in params and self.ns.path(arg):
                self.emit(node, "monkeypatch", f"passes {self.ns.path(arg)} to {fn or 'a lambda'}, which "
                                               f"assigns attributes of its argument {params[key]}",
                          self.ns.path(arg))
        self.generic_visit(node)

    def ipython_call(self, node: ast.Call, method: str) -> None:
        """get_ipython().run_line_magic("matplotlib", "inline") and the like: read as the magic it runs."""
        texts = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None
                 for a in node.args]
        if not texts or None in texts or node.keywords:
            self.emit(node, "magic", f"runs an IPython command chosen at run time ({_snippet(node)})")
            return
        tree, found, _ = parse_cell(SHELL_CALLS[method].format(*texts, "", ""))
        for _, kind, detail, target in found:
            self.emit(node, kind, detail, target)
        if tree is not None:
            self.inline(tree, node)

    def hidden(self, node: ast.Call, called: str | None, method: str | None) -> None:
        """A path into a hidden place among the strings a call is given: a literal path to any call,
        or the strings a file call joins into one (open(os.path.join("..", "solutions", name)))."""
        if id(node) in self.pathed or _name(node.func) == "print":
            return
        parts = node.args + [k.value for k in node.keywords] + ([node.func.value] if method else [])
        # literal paths given to this call (a call inside reports its own); a URL is no file
        paths = [s for part in parts for s in self.ns.strings(part, into_calls=False)
                 if ("/" in s or "\\" in s) and "://" not in s]
        if called in SAVE_LOAD:
            i = SAVE_LOAD[called]
            joined = node.args[i:i + 1] + [k.value for k in node.keywords if k.arg in PATH_KEYWORDS]
        elif (_name(node.func) == "open" and "open" not in self.ns.made) \
                or (called or "").split(".")[0] in PATH_MODULES:
            joined = node.args + [k.value for k in node.keywords]
        else:
            joined = [node.func.value] + node.args if method in PATH_VERBS else []
        paths += ["/".join(self.ns.strings(part)) for part in joined]
        self.pathed |= {id(n) for part in joined for n in ast.walk(part)}  # os.path.join inside: said here
        place = next(filter(None, map(_place, paths)), None)
        if place:
            self.emit(node, "hidden-files", f"a path into {place} ({_snippet(node)})", place)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _SCRIPT.search(node.value):
            self.emit(node, "javascript", "a string holding Javascript for the browser")


def _parse(source: str) -> ast.Module | None:
    """The syntax tree of code held in a string, or None if it is no scannable Python."""
    try:
        return _shallow(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _outside_cwd(arg: ast.AST | None) -> bool:
    """Whether a path argument may point outside the working directory (a computed one may)."""
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return arg is not None
    path = arg.value.replace("\\", "/")
    return path.startswith(("/", "~")) or ".." in path.split("/") or re.match(r"^[A-Za-z]:", path) is not None


def scan_code(source: str, ns: Namespace) -> list[tuple[int | None, str, str, str]]:
    """(line, kind, detail, target) for one code cell's source, read in the namespace ``ns``."""
    tree, found, error = parse_cell(source)
    if error:
        return found + [(error[0], "syntax-error", f"the cell does not parse: {error[1]}", "")]
    scan = _CellScan(ns)
    scan.visit(tree)
    return found + [(line, kind, detail, target) for (line, kind, detail), target in scan.found.items()]


# ------------------------------------------------------------------ notebooks and classes


def _load(nb: nbformat.NotebookNode | Path | str) -> nbformat.NotebookNode:
    return nb if isinstance(nb, nbformat.NotebookNode) else nbformat.read(str(nb), as_version=4)


def _finding(cell: str, line: int | None, kind: str, detail: str, target: str = "") -> Finding:
    return Finding(cell, line, kind, SEVERITY[kind], detail, target)


def _script_output(cell) -> bool:
    """Whether a code cell's saved outputs hold script for the browser."""
    for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
        data = out.get("data", {}) if isinstance(out, dict) else {}
        if isinstance(data, dict) and ("application/javascript" in data
                                       or _SCRIPT.search(str(data.get("text/html", "")))):
            return True
    return False


def scan_notebook(submitted: nbformat.NotebookNode | Path,
                  released: nbformat.NotebookNode | Path) -> list[Finding]:
    """Every finding for one submission, in notebook order; duplicated and deleted cells last."""
    sub, rel = _load(submitted), _load(released)
    rel_cells, cells = rel.get("cells", []), sub.get("cells", [])
    graded = {_grade_id(c): c for c in rel_cells if _grade_id(c)}
    plain = {c.get("id"): c for c in rel_cells if not _grade_id(c) and c.get("id")}
    plain_sources = {_norm(_source(c)) for c in plain.values() if c.get("cell_type") == "code"}
    ids = [_grade_id(c) for c in cells]
    last = {gid: i for i, gid in enumerate(ids) if gid}  # nbgrader keeps the last of duplicates

    plan = []  # (label, cell, the released source it replaces, mode)
    for i, cell in enumerate(cells):
        gid, orig = ids[i], plain.get(cell.get("id"))
        if gid in graded:
            locked = graded[gid].get("metadata", {}).get("nbgrader", {}).get("locked") and last[gid] == i
            label = gid if last[gid] == i else f"{gid} (copy in cell {i + 1})"
            plan.append((label, cell, _source(graded[gid]), "locked" if locked else "scan"))
        elif orig is not None and orig.get("cell_type") == cell.get("cell_type"):
            same = _norm(_source(cell)) == _norm(_source(orig))
            plan.append((f"cell {i + 1}", cell, _source(orig), "same" if same else "scan"))
        elif cell.get("cell_type") == "code" and _norm(_source(cell)) in plain_sources:
            plan.append((f"cell {i + 1}", cell, _source(cell), "same"))
        else:
            plan.append((f"added cell {i + 1}", cell, "", "scan"))
    locked_trees = [parse_cell(_source(c))[0] for c in rel_cells if c.get("cell_type") == "code"
                    and c.get("metadata", {}).get("nbgrader", {}).get("locked")]
    trees = [parse_cell(_source(c))[0] for _, c, _, mode in plan
             if mode != "locked" and c.get("cell_type") == "code"]
    ns = Namespace.build([t for t in locked_trees if t], [t for t in trees if t])

    findings = []
    for label, cell, original, mode in plan:
        source, code = _source(cell), cell.get("cell_type") == "code"
        if mode == "locked":
            findings += _compare_locked(label, cell, graded[label])
        elif mode == "scan" and not code and _SCRIPT.search(source):
            findings.append(_finding(label, None, "javascript",
                                     "markdown holding Javascript (it runs in the grader's browser)"))
        elif mode == "scan" and code:
            # what the released cell already did (a course demo using `reference`) is not the student's
            baseline = {(k, d) for _, k, d, _ in scan_code(original, replace(ns, rebound=set(ns.rebound)))}
            findings += [_finding(label, line, kind, detail, target) for line, kind, detail, target
                         in scan_code(source, ns) if (kind, detail) not in baseline]
        if _script_output(cell):
            findings.append(_finding(label, None, "script-output", "a saved output holds script for "
                                                                   "the browser (nbgrader clears outputs)"))

    for gid, n in Counter(g for g in ids if g).items():
        if n > 1:
            meta = graded.get(gid, {}).get("metadata", {}).get("nbgrader", {})
            shadows = meta.get("grade") or meta.get("locked")
            why = "a copy of a grade cell" if shadows else "a copied solution cell"
            detail = f"grade_id {gid} appears {n} times ({why}; nbgrader grades the last)"
            findings.append(_finding(gid, None, "duplicate-grade-id", detail))
    for gid, c in graded.items():
        meta = c.get("metadata", {}).get("nbgrader", {})
        if gid not in last and (meta.get("grade") or meta.get("locked")):
            what = f"grade cell ({meta.get('points', 0)} points)" if meta.get("grade") else "locked cell"
            findings.append(_finding(gid, None, "deleted-grade-cell", f"the {what} {gid} was deleted"))
    return findings


def _compare_locked(gid: str, cell, original) -> list[Finding]:
    """A locked cell whose text changed: nbgrader restores it, but someone tried."""
    if cell.get("cell_type") != original.get("cell_type"):
        return [_finding(gid, None, "edited-locked-cell",
                         f"changed from {original.get('cell_type')} to {cell.get('cell_type')}")]
    if _norm(_source(cell)) == _norm(_source(original)):
        return []
    new, old = _source(cell).splitlines(), _source(original).splitlines()
    k = next((j for j, (a, b) in enumerate(zip(new, old)) if _norm(a) != _norm(b)), min(len(new), len(old)))
    shown = repr(new[k].strip()[:50]) if k < len(new) else "lines removed"
    return [_finding(gid, k + 1, "edited-locked-cell", f"differs from the release: {shown}")]


def review_lines(findings: list[Finding]) -> list[str]:
    """One line per finding, for the grader: severity, kind, cell and line, what was found."""
    return [f"{f.severity:6} {f.kind:18} {f.cell}{'' if f.line is None else f' line {f.line}'}: {f.detail}"
            for f in findings]


def summarise(findings: list[Finding]) -> str:
    """The review lines of a report as one text, or "no findings"."""
    return "\n".join(review_lines(findings)) or "no findings"


def _plainly(f: Finding) -> str:
    """What a tamper finding means, in words a student understands."""
    what, words = f.target, re.findall(r"\w+", f.target)
    if f.kind == "monkeypatch":
        compares = words and words[-1] in COMPARING
        why = "the checks use to compare results" if compares else "the checks rely on"
        return f"replaces {what}, which {why}" if what else f"replaces part of a library {why}"
    if f.kind == "redefines-grader":
        if what in GRADER_MODULES:
            return f"gives {what} a new meaning, while the checks compute with it"
        if what in BUILTIN_NAMES:
            return f"redefines Python's built-in {what}, which the grade cells use"
        return f"redefines {what}, which the grading uses to check your answers"
    if f.kind == "hidden-files":
        return f"tries to reach {what or 'files the grading keeps hidden'}"
    if f.kind == "kernel-hooks" and (what in FRAME_ATTRS or what.startswith(KERNEL_PATHS)):
        return "reaches into the interpreter's stack frames or tracing, where the grader's own objects live"
    if f.kind == "kernel-hooks":
        return f"hooks into the notebook's shell ({what or 'the kernel'}), which runs the checks"
    if f.kind == "javascript":
        return "holds Javascript, which would run in the grader's browser"
    return f.detail


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", and " + items[-1]


def explain(findings: list[Finding], most: int = 4) -> str:
    """A short paragraph for the student's feedback on why the submission is held for review ("" if
    it is not); it follows "Held for review: " on the feedback page."""
    said: dict[str, list[str]] = {}
    for f in findings:
        if f.severity == "tamper" and _plainly(f) not in said.setdefault(f.cell, []):
            said[f.cell].append(_plainly(f))
    said = {cell: phrases for cell, phrases in said.items() if phrases}
    if not said:
        return ""
    parts = [("" if cell.startswith(("cell ", "added cell ")) else "cell ") + f"{cell} {_listed(phrases[:3])}"
             for cell, phrases in list(said.items())[:most]]
    if len(said) > most:
        parts.append(f"{len(said) - most} more cell{'s' if len(said) - most > 1 else ''} do the same")
    return (f"The automatic scan found code that could change how answers are checked: {'; '.join(parts)}. "
            "Your score is on hold until your instructor has looked; nothing is decided yet, and if there "
            "is an innocent reason, tell them.")


def is_tampering(findings: list[Finding]) -> bool:
    """Whether any finding has severity tamper."""
    return any(f.severity == "tamper" for f in findings)


def scan_class(root: Path, lesson: str, released: Path) -> dict[str, list[Finding]]:
    """Findings for every root/submitted/<student>/<lesson>/<lesson>.ipynb, by student."""
    release, results = _load(released), {}
    for folder in sorted(Path(root, "submitted").glob(f"*/{lesson}")):
        try:
            results[folder.parent.name] = scan_notebook(_load(folder / f"{lesson}.ipynb"), release)
        except Exception as err:  # a missing or broken file is reported; the class scan goes on
            results[folder.parent.name] = [_finding("notebook", None, "unreadable",
                                                    f"{type(err).__name__}: {str(err)[:120]}")]
    return results


def write_report(results: dict[str, list[Finding]], path: Path) -> Path:
    """A CSV of every finding (student, cell, line, kind, severity, detail), sorted by student."""
    path = Path(path)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "cell", "line", "kind", "severity", "detail"])
        for student in sorted(results):
            writer.writerows([student, x.cell, "" if x.line is None else x.line, x.kind, x.severity, x.detail]
                             for x in results[student])
    return path
