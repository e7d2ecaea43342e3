"""Scanning one code cell: an ``ast`` visitor that reads every binding, write, import, call and
attribute against the ``Namespace`` and reports (line, kind, detail, target): a check or builtin
rebound, a library patched, a path into a hidden place, the network, processes, files, the kernel."""

from __future__ import annotations

import ast
import re

from .markup import active_content
from .names import Namespace, imported, name_of, root_of, snippet, written_params
from .parsing import parse_cell, parse_python
from .rules import (
    ALLOWED_WRITES,
    BUILTIN_NAMES,
    CODE_PATHS,
    DOC_DUNDERS,
    DYNAMIC_NAMES,
    FILES,
    FRAME_ATTRS,
    GRADER_MODULES,
    GRADER_PREFIXES,
    JS_NAMES,
    KERNEL_PATHS,
    MUTATORS,
    NATURAL_NAMES,
    NETWORK,
    OS_FILES,
    PATH_KEYWORDS,
    PATH_METHODS,
    PATH_MODULES,
    PATH_VERBS,
    PROCESS,
    PROCESS_USES,
    SAVE_LOAD,
    SCRIPT,
    SHELL_ATTRS,
    SHELL_CALLS,
    hidden_place,
)


def _dunder(name: str) -> bool:
    """A special name that changes how an object behaves (__eq__, __len__), not one that documents it."""
    return name.startswith("__") and name.endswith("__") and len(name) > 4 and name not in DOC_DUNDERS


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
        path, root = self.ns.path(t), root_of(t)
        dunders = [n.attr for n in ast.walk(t) if isinstance(n, ast.Attribute) and _dunder(n.attr)]
        shown = path if path and "[" not in path else snippet(t, 40)
        if path and not path.startswith(ALLOWED_WRITES):
            self.emit(t, "monkeypatch", f"{verb} {path} ({how})", shown)
        elif dunders:
            self.emit(t, "monkeypatch", f"{verb} {dunders[0]} of {snippet(t.value, 30)} ({how})", shown)
        elif isinstance(root, ast.Name) and root.id not in self.ns.made and not path:
            self.emit(t, "monkeypatch", f"{verb} {snippet(t, 40)}, but {root.id} is no object the student "
                                        f"created ({how})", shown)
        elif not isinstance(root, ast.Name) and self.ns.may_be_module(root):
            # (lambda: np)().allclose = f, [np][0].allclose = f
            self.emit(t, "monkeypatch", f"{verb} {snippet(t, 40)}, on what may be a module ({how})", shown)

    def visit_Module(self, node: ast.Module) -> None:
        self.top = {id(stmt) for stmt in node.body}
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.target(t, node.value, "assigns", snippet(node))
        self.generic_visit(node)
        if id(node) in self.top:  # `F = np.zeros(3)` run unconditionally: from here on F is the student's
            for name in (t.id for t in node.targets if isinstance(t, ast.Name)):
                if self.ns.fresh(node.value):
                    self.ns.rebound.add(name)
                else:
                    self.ns.rebound.discard(name)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.target(node.target, node.value, "assigns", snippet(node))
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.target(node.target, None, "changes", snippet(node))
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.target(t, None, "deletes", snippet(node))
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.target(node.target, None, "binds", f"for {snippet(node.target, 30)} in ...")
        self.generic_visit(node)

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self.target(item.optional_vars, None, "binds", snippet(item))
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.bind(node.target.id, node, self.ns.path(node.value), snippet(node), self.ns.data(node.value))
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
        for name, path, module in imported(node):
            plain = path.split(".")[-1] == name  # from numpy import abs: the same function, not a fake
            self.bind(name, node, path, snippet(node), plain)
            if module.split(".")[0] == "helpers":
                self.emit(node, "uses-reference", f"imports {module} from the course's helpers")
            self.categorise(node, module, f"imports {module}", imported=True)
        if any(a.name == "*" for a in node.names):
            self.emit(node, "shadows-name", f"{snippet(node)} may shadow any name the grading uses")

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
            if name_of(root_of(node)) == "reference":  # the release binds no `reference`: say what is used
                self.emit(node, "uses-reference", f"uses {snippet(node, 40)}, the course's implementation")
                return
            self.generic_visit(node)
            return
        ref = self.ns.expected.get("reference")
        if name_of(root_of(node)) == "reference" or (ref and path.startswith(ref + ".")):
            self.emit(node, "uses-reference", f"uses {snippet(node, 40)}, the course's implementation")
        self.categorise(node, path, f"uses {path}")
        for child in ast.walk(node):  # calls inside the chain: getattr(np, name).x
            if isinstance(child, ast.Call):
                self.visit(child)

    def visit_Call(self, node: ast.Call) -> None:
        fn, args = name_of(node.func), node.args
        self.calls.add(id(node.func))
        if fn in ("globals", "vars") and fn not in self.ns.made:
            self.emit(node, "dynamic-code", f"calls {fn}()")
        elif fn == "getattr" and len(args) > 1 and not isinstance(args[1], ast.Constant):
            self.emit(node, "dynamic-code", f"getattr with a computed name ({snippet(node)})")
        elif fn in ("setattr", "delattr") and args:
            literal = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else ""
            owner, root = self.ns.path(args[0]), root_of(args[0])
            foreign = isinstance(root, ast.Name) and root.id not in self.ns.made
            if owner or foreign or _dunder(str(literal)):
                what = owner or snippet(args[0], 30)
                self.emit(node, "monkeypatch", f"{fn} on {what} ({snippet(node)})",
                          f"{what}.{literal}" if literal else what)
        elif fn == "open" and fn not in self.ns.made:
            self.emit(node, "file-access", f"opens a file ({snippet(node)})")
        elif fn in ("exit", "quit") and fn not in self.ns.made:
            self.emit(node, "process", f"calls {fn}(), which stops the kernel")
        elif fn in ("exec", "eval", "compile") and fn not in self.ns.made and args \
                and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            tree, _ = parse_python(args[0].value)
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
                self.emit(node, "file-access", f"a file outside the notebook's folder ({snippet(node)})")
        if method in PATH_METHODS:
            self.emit(node, "file-access", f"uses .{method}() ({snippet(node)})")
        self.hidden(node, called, method)
        owner = self.ns.path(node.func.value) if method else None
        if method in ("__setattr__", "__delattr__") or (
                method in MUTATORS and owner and not owner.startswith(ALLOWED_WRITES + ("sys.path",))):
            what = owner or snippet(node.func.value, 30)
            self.emit(node, "monkeypatch", f"changes {what} ({snippet(node)})", what)
        params = self.ns.writers.get(fn, {}) if fn else \
            written_params(node.func) if isinstance(node.func, ast.Lambda) else {}
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
            self.emit(node, "magic", f"runs an IPython command chosen at run time ({snippet(node)})")
            return
        tree, found, _ = parse_cell(SHELL_CALLS[method].format(*texts, "", ""))
        for _, kind, detail, target in found:
            self.emit(node, kind, detail, target)
        if tree is not None:
            self.inline(tree, node)

    def hidden(self, node: ast.Call, called: str | None, method: str | None) -> None:
        """A path into a hidden place among the strings a call is given: a literal path to any call,
        or the strings a file call joins into one (open(os.path.join("..", "solutions", name)))."""
        if id(node) in self.pathed or name_of(node.func) == "print":
            return
        parts = node.args + [k.value for k in node.keywords] + ([node.func.value] if method else [])
        # literal paths given to this call (a call inside reports its own); a URL is no file
        paths = [s for part in parts for s in self.ns.strings(part, into_calls=False)
                 if ("/" in s or "\\" in s) and "://" not in s]
        if called in SAVE_LOAD:
            i = SAVE_LOAD[called]
            joined = node.args[i:i + 1] + [k.value for k in node.keywords if k.arg in PATH_KEYWORDS]
        elif (name_of(node.func) == "open" and "open" not in self.ns.made) \
                or (called or "").split(".")[0] in PATH_MODULES:
            joined = node.args + [k.value for k in node.keywords]
        else:
            joined = [node.func.value] + node.args if method in PATH_VERBS else []
        paths += ["/".join(self.ns.strings(part)) for part in joined]
        self.pathed |= {id(n) for part in joined for n in ast.walk(part)}  # os.path.join inside: said here
        place = hidden_place(paths)
        if place:
            self.emit(node, "hidden-files", f"a path into {place} ({snippet(node)})", place)

    def visit_Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if SCRIPT.search(node.value):
            self.emit(node, "javascript", "a string holding Javascript for the browser")
        elif "<" in node.value and active_content(node.value):
            quote = active_content(node.value)[0]
            self.emit(node, "javascript", f"a string holding active content for the browser: {quote}")


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
