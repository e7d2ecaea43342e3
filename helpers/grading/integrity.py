"""Static integrity scan of submitted notebooks: what a student changed that could fool the grading.

Nothing is executed. Every cell a student can edit (solution cells, cells they added, course
cells they changed) is parsed with ``ast`` and read against the released student notebook.
Severity ``tamper`` marks what an honest solution has no reason to do (patching numpy,
redefining a check, ``exec``, IPython tricks, the network); ``review`` is worth a human look
(files, processes, a solution that calls the reference, edited or deleted locked cells).
Locked cells are restored by nbgrader when it grades, so they are only compared.
Cells are named by grade_id, otherwise by 1-based position: "added cell 7", "cell 12".
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
    "duplicate-grade-id": "tamper",  # review when it only copies a solution cell
    "monkeypatch": "tamper",
    "redefines-grader": "tamper",
    "ipython-tricks": "tamper",
    "dynamic-code": "tamper",
    "network": "tamper",
    "edited-locked-cell": "review",
    "deleted-grade-cell": "review",
    "shadows-name": "review",
    "uses-reference": "review",
    "process": "review",
    "file-access": "review",
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
DOC_DUNDERS = {"__doc__", "__name__", "__qualname__"}  # renaming or documenting patches nothing

NETWORK = {"socket", "urllib", "urllib3", "http", "requests", "httpx", "aiohttp", "ftplib", "smtplib",
           "poplib", "imaplib", "telnetlib", "xmlrpc", "ssl", "websocket", "websockets", "paramiko"}
PROCESS = {"os", "subprocess", "sys", "signal", "multiprocessing", "threading", "_thread", "concurrent",
           "ctypes", "resource", "pty", "atexit", "asyncio"}
PROCESS_USES = ("os._exit", "os.abort", "os.kill", "os.fork", "os.system", "os.popen", "os.exec", "os.spawn",
                "sys.exit", "sys.settrace", "sys.setprofile", "sys.path", "subprocess.", "signal.",
                "multiprocessing.", "threading.", "ctypes.")  # prefixes of uses worth pointing at
FILES = {"shutil", "glob", "pickle", "pathlib", "tempfile", "fileinput", "zipfile", "tarfile", "sqlite3",
         "shelve", "dbm", "marshal", "io", "joblib"}
OS_FILES = {"listdir", "scandir", "walk", "remove", "unlink", "rmdir", "removedirs", "rename", "replace",
            "makedirs", "mkdir", "chdir", "chmod", "chown", "symlink", "link", "open", "truncate"}
PATH_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "iterdir", "rglob", "unlink", "rmdir",
                "touch", "symlink_to", "hardlink_to"}
SAVE_LOAD = {"numpy.save": 0, "numpy.savez": 0, "numpy.savez_compressed": 0, "numpy.savetxt": 0,
             "numpy.load": 0, "numpy.loadtxt": 0, "numpy.genfromtxt": 0, "numpy.fromfile": 0,
             "numpy.memmap": 0, "torch.save": 1, "torch.load": 0}  # -> position of the path argument
MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "append", "insert", "extend", "remove",
            "__setitem__", "__delitem__"}
DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__"}
FRAME_PATHS = {"sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes",
               "gc.get_referrers", "gc.get_objects"}  # reach the grader's objects through the interpreter
CODE_PATHS = ("pickle.loads", "marshal.loads", "types.FunctionType", "types.CodeType", "runpy.", "code.")
FRAME_ATTRS = {"f_globals", "f_locals", "f_builtins", "f_back", "gi_frame", "tb_frame", "cr_frame"}
SHELL_ATTRS = {"set_custom_exc", "showtraceback", "run_cell", "run_line_magic", "run_cell_magic", "user_ns",
               "register_magic_function"}
JS_NAMES = {"Javascript", "display_javascript"}
# Settings students change honestly; writing them patches nothing the grading reads.
ALLOWED_WRITES = ("matplotlib.rcParams", "matplotlib.pyplot.rcParams", "torch.backends.cudnn.")
HARMLESS_MAGICS = {"matplotlib", "time", "timeit", "precision", "who", "whos"}  # %time bodies are scanned
PYTHON_CELL_MAGICS = {"capture", "prun"}  # flagged, but their body is Python and is scanned too
MAX_DEPTH = 150  # syntax-tree depth: honest cells stay far below; deeper ones would exhaust the stack

_MAGIC = re.compile(r"^(?P<indent>\s*)(?P<esc>%%|%|!)(?P<name>\w*)(?P<rest>.*)$")
_ASSIGN_MAGIC = re.compile(r"^\s*[\w.,\s\[\]]+=\s*[%!](?!=)")  # files = !ls
_HELP = re.compile(r"^(?P<indent>\s*)(\?+[\w.]+|[\w.]+\?+)\s*$")  # np.exp?
_TIMEIT_OPTS = re.compile(r"^\s*(?:-[a-z]+(?:\s+\d+)?\s+)*")
_SCRIPT = re.compile(r"<script|javascript:|application/javascript", re.I)


@dataclass(frozen=True)
class Finding:
    """One thing a reviewer should see: where, what kind, how serious, in words."""

    cell: str
    line: int | None
    kind: str
    severity: str
    detail: str


# ------------------------------------------------------------------ parsing cells


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _norm(text: str) -> str:
    return "".join(text.split())  # `f( x )` and `f(x)` are the same cell


def _grade_id(cell) -> str | None:
    return (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") or None


def parse_cell(source: str) -> tuple[ast.Module | None, list[tuple[int, str]], tuple[int | None, str] | None]:
    """The syntax tree with IPython lines blanked, the IPython lines flagged, and an error (line, message)."""
    try:
        return _shallow(ast.parse(source)), [], None
    except SyntaxError:
        pass  # perhaps IPython syntax: a cell that parses as Python holds none, so strip only now
    except (ValueError, RecursionError, MemoryError) as err:
        return None, [], (None, _unparsable(err))
    lines, flagged = source.split("\n"), []
    first = next((i for i, line in enumerate(lines) if line.strip()), 0)
    for i, line in enumerate(lines):
        magic, indent = _MAGIC.match(line), re.match(r"\s*", line).group()
        if magic and magic["esc"] == "%%" and i == first:
            if magic["name"] not in HARMLESS_MAGICS:
                flagged.append((i + 1, line.strip()))
            if magic["name"] not in HARMLESS_MAGICS | PYTHON_CELL_MAGICS:  # %%bash, %%javascript: not Python
                return ast.Module(body=[], type_ignores=[]), flagged, None
            lines[i] = "pass"
        elif magic and magic["esc"] == "%" and magic["name"] in HARMLESS_MAGICS:
            body = _TIMEIT_OPTS.sub("", magic["rest"]) if magic["name"] in ("time", "timeit") else ""
            lines[i] = indent + (body.strip() or "pass")
        elif magic or _ASSIGN_MAGIC.match(line):
            flagged.append((i + 1, line.strip()))
            lines[i] = indent + "pass"
        elif _HELP.match(line):
            lines[i] = indent + "pass"
    try:
        return _shallow(ast.parse("\n".join(lines))), flagged, None
    except SyntaxError as err:
        return None, flagged, (err.lineno, err.msg)
    except (ValueError, RecursionError, MemoryError) as err:
        return None, flagged, (None, _unparsable(err))


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
        return called + "()" if called in FRAME_PATHS else None

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
        self.found: dict[tuple[int | None, str, str], None] = {}  # ordered, without repeats
        self.scopes: list[set[str]] = []  # names declared `global` in each enclosing function or class
        self.top: set[int] = set()  # the cell's unconditional top-level statements
        self.calls: set[int] = set()  # functions in call position (setattr(...), not f = setattr)

    def emit(self, node: ast.AST, kind: str, detail: str) -> None:
        self.found[(getattr(node, "lineno", None), kind, detail)] = None

    # -------------------------------------------------- names bound and objects written

    def bind(self, name: str, node: ast.AST, got: str | None, how: str) -> None:
        """A name bound at module level (to ``got``, if a module): does it replace one the grading uses?"""
        if self.scopes and name not in self.scopes[-1]:
            return  # a function's or class's own names cannot shadow the notebook's
        want = self.ns.expected.get(name)
        if want is not None and got == want:
            return  # `import numpy as np` again
        if name in GRADER_MODULES:
            self.emit(node, "redefines-grader", f"rebinds {name} to something other than {want} ({how})")
        elif name in self.ns.grader:
            self.emit(node, "redefines-grader", f"rebinds {name}, which the grade cells use ({how})")
        elif name in BUILTIN_NAMES:
            kind = "shadows-name" if name in NATURAL_NAMES else "redefines-grader"
            self.emit(node, kind, f"rebinds the builtin {name} ({how})")
        elif name in self.ns.setup:
            self.emit(node, "shadows-name", f"rebinds {name}, defined by the lesson's setup ({how})")
        elif name.startswith(GRADER_PREFIXES):
            self.emit(node, "shadows-name", f"defines {name}, named like the course's checks ({how})")

    def target(self, t: ast.AST, value: ast.AST | None, verb: str, how: str) -> None:
        if isinstance(t, ast.Name):
            self.bind(t.id, t, self.ns.path(value), how)
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
        if path and not path.startswith(ALLOWED_WRITES):
            self.emit(t, "monkeypatch", f"{verb} {path} ({how})")
        elif dunders:
            self.emit(t, "monkeypatch", f"{verb} {dunders[0]} of {_snippet(t.value, 30)} ({how})")
        elif isinstance(root, ast.Name) and root.id not in self.ns.made and not path:
            self.emit(t, "monkeypatch", f"{verb} {_snippet(t, 40)}, but {root.id} is no object the student "
                                        f"created ({how})")
        elif not isinstance(root, ast.Name) and self.ns.may_be_module(root):
            # (lambda: np)().allclose = f, [np][0].allclose = f
            self.emit(t, "monkeypatch", f"{verb} {_snippet(t, 40)}, on what may be a module ({how})")

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
        self.bind(node.target.id, node, self.ns.path(node.value), _snippet(node))
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bind(node.name, node, None, f"except ... as {node.name}")
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
            self.bind(name, node, path, _snippet(node))
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
        if top in ("importlib", "runpy") or path in FRAME_PATHS or path.startswith(CODE_PATHS) \
                or path in {f"builtins.{n}" for n in DYNAMIC_NAMES}:
            self.emit(node, "dynamic-code", what)
        if top == "mock" or path.startswith("unittest.mock"):
            self.emit(node, "monkeypatch", what + " (a patching tool)")
        if last in JS_NAMES | {"get_ipython"} or top == "ipykernel" or path.startswith(("IPython.core",
                                                                                         "IPython.terminal")):
            self.emit(node, "ipython-tricks", what)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if node.id == "get_ipython":
            self.emit(node, "ipython-tricks", "uses get_ipython(), the kernel's shell")
        elif node.id in JS_NAMES:
            self.emit(node, "ipython-tricks", f"displays Javascript ({node.id})")
        elif node.id in DYNAMIC_NAMES and node.id not in self.ns.made:
            self.emit(node, "dynamic-code", f"uses {node.id}")
        elif node.id == "reference":
            self.emit(node, "uses-reference", "uses reference, the course's implementation")
        elif node.id in ("setattr", "delattr") and id(node) not in self.calls and node.id not in self.ns.made:
            # f = setattr; f(np, ...) or functools.partial(setattr, np): what it patches is out of sight
            self.emit(node, "monkeypatch", f"passes {node.id} around as a value")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in SHELL_ATTRS:
            self.emit(node, "ipython-tricks", f"uses the shell's {node.attr}")
        if node.attr in FRAME_ATTRS:
            self.emit(node, "dynamic-code", f"reads the interpreter's stack frames ({node.attr})")
        path = self.ns.path(node) if isinstance(node.ctx, ast.Load) else None
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
                self.emit(node, "monkeypatch", f"{fn} on {owner or _snippet(args[0], 30)} ({_snippet(node)})")
        elif fn == "open" and fn not in self.ns.made:
            self.emit(node, "file-access", f"opens a file ({_snippet(node)})")
        elif fn in ("exit", "quit") and fn not in self.ns.made:
            self.emit(node, "process", f"calls {fn}(), which stops the kernel")
        called = self.ns.path(node.func)
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if called in SAVE_LOAD or method in ("savefig", "tofile"):
            i = SAVE_LOAD.get(called, 0)
            where = args[i] if len(args) > i else next(
                (k.value for k in node.keywords if k.arg in ("file", "fname", "f", "filename")), None)
            if _outside_cwd(where):
                self.emit(node, "file-access", f"a file outside the notebook's folder ({_snippet(node)})")
        if method in PATH_METHODS:
            self.emit(node, "file-access", f"uses .{method}() ({_snippet(node)})")
        owner = self.ns.path(node.func.value) if method else None
        if method in ("__setattr__", "__delattr__") or (
                method in MUTATORS and owner and not owner.startswith(ALLOWED_WRITES + ("sys.path",))):
            what = owner or _snippet(node.func.value, 30)
            self.emit(node, "monkeypatch", f"changes {what} ({_snippet(node)})")
        params = self.ns.writers.get(fn, {}) if fn else \
            _written_params(node.func) if isinstance(node.func, ast.Lambda) else {}
        for key, arg in list(enumerate(args)) + [(k.arg, k.value) for k in node.keywords if k.arg]:
            if key in params and self.ns.path(arg):
                self.emit(node, "monkeypatch", f"passes {self.ns.path(arg)} to {fn or 'a lambda'}, which "
                                               f"assigns attributes of its argument {params[key]}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and _SCRIPT.search(node.value):
            self.emit(node, "ipython-tricks", "a string holding Javascript for the browser")


def _outside_cwd(arg: ast.AST | None) -> bool:
    """Whether a path argument may point outside the working directory (a computed one may)."""
    if not isinstance(arg, ast.Constant) or not isinstance(arg.value, str):
        return arg is not None
    path = arg.value.replace("\\", "/")
    return path.startswith(("/", "~")) or ".." in path.split("/") or re.match(r"^[A-Za-z]:", path) is not None


def scan_code(source: str, ns: Namespace) -> list[tuple[int | None, str, str]]:
    """(line, kind, detail) for one code cell's source, read in the namespace ``ns``."""
    tree, magics, error = parse_cell(source)
    found = [(line, "ipython-tricks", f"IPython magic or shell line: {text[:60]}") for line, text in magics]
    if error:
        return found + [(error[0], "syntax-error", f"the cell does not parse: {error[1]}")]
    scan = _CellScan(ns)
    scan.visit(tree)
    return found + list(scan.found)


# ------------------------------------------------------------------ notebooks and classes


def _load(nb: nbformat.NotebookNode | Path | str) -> nbformat.NotebookNode:
    return nb if isinstance(nb, nbformat.NotebookNode) else nbformat.read(str(nb), as_version=4)


def _finding(cell: str, line: int | None, kind: str, detail: str, severity: str | None = None) -> Finding:
    return Finding(cell, line, kind, severity or SEVERITY[kind], detail)


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
            findings.append(_finding(label, None, "ipython-tricks",
                                     "markdown holding Javascript (it runs in the grader's browser)"))
        elif mode == "scan" and code:
            # what the released cell already did (a course demo using `reference`) is not the student's
            baseline = {(k, d) for _, k, d in scan_code(original, replace(ns, rebound=set(ns.rebound)))}
            findings += [_finding(label, line, kind, detail) for line, kind, detail in scan_code(source, ns)
                         if (kind, detail) not in baseline]

    for gid, n in Counter(g for g in ids if g).items():
        if n > 1:
            meta = graded.get(gid, {}).get("metadata", {}).get("nbgrader", {})
            shadows = meta.get("grade") or meta.get("locked")
            why = "a copy can shadow a grade cell" if shadows else "a copied solution cell; the last counts"
            detail = f"grade_id {gid} appears {n} times ({why})"
            findings.append(_finding(gid, None, "duplicate-grade-id", detail, None if shadows else "review"))
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


def summarise(findings: list[Finding]) -> str:
    """One line per finding, for a report: severity, kind, where, what."""
    if not findings:
        return "no findings"
    return "\n".join(f"{f.severity:6} {f.kind:18} {f.cell}{'' if f.line is None else f' line {f.line}'}: "
                     f"{f.detail}" for f in findings)


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
