"""The namespace the grade cells run in, as the integrity scan models it: which names stand for
modules (``np``, ``t = np.testing``, ``m = importlib.import_module("torch")``), which the grading
relies on, which the student made, and which strings a name may hold. Also the small ``ast`` helpers
the cell scanner shares."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from .rules import DATA_CALLS, FRAME_PATHS, GRADER_MODULES, GRADER_NAMES, GRADER_PREFIXES, LEARNER_NAMES


def root_of(node: ast.AST) -> ast.AST:
    """The object an attribute or item chain starts from: np for np.testing.assert_allclose."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def name_of(node: ast.AST) -> str | None:
    """The name if the node is a plain name, else None."""
    return node.id if isinstance(node, ast.Name) else None


def snippet(node: ast.AST, width: int = 60) -> str:
    """The node's code on one line, cut to ``width`` characters, for a finding's detail."""
    text = ast.unparse(node).split("\n")[0]
    return text if len(text) <= width else text[: width - 1] + "…"


def imported(tree: ast.AST) -> Iterator[tuple[str, str, str]]:
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


def _targets(node: ast.stmt | ast.NamedExpr) -> list[ast.expr]:
    """What an assignment or deletion binds, writes or deletes."""
    return node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]


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
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            for t in _targets(node):
                yield from split(t, node.value)
        elif isinstance(node, (ast.For, ast.comprehension)):  # for m in (np, torch), for m in mods
            literal = isinstance(node.iter, (ast.Tuple, ast.List, ast.Set))
            for elt in node.iter.elts if literal else [node.iter]:
                yield from split(node.target, elt)
        elif isinstance(node, ast.arguments):  # def f(m=np)
            params = node.posonlyargs + node.args
            yield from ((a.arg, d) for a, d in zip(params[len(params) - len(node.defaults):], node.defaults))


def written_params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[int | str, str]:
    """Parameters whose attributes or items the function assigns: {position and name: parameter}."""
    params, hit = [a.arg for a in fn.args.posonlyargs + fn.args.args], set()
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.Delete, ast.AugAssign, ast.AnnAssign)):
            written = [t for t in _targets(node) if isinstance(t, (ast.Attribute, ast.Subscript))]
            hit |= {name_of(root_of(t)) for t in written}
        elif isinstance(node, ast.Call) and name_of(node.func) in ("setattr", "delattr") and node.args:
            hit.add(name_of(node.args[0]))
    return {key: p for i, p in enumerate(params) if p in hit for key in (i, p)}


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
            for name, path, _ in imported(tree):
                ns.expected[name] = ns.modules[name] = path
                checks = path.startswith(("helpers.checks", "helpers.quiz"))
                if (checks or name.startswith(GRADER_PREFIXES)) and name not in LEARNER_NAMES:
                    ns.grader.add(name)
            ns.setup |= _bound(tree)
        for name, path in GRADER_MODULES.items():
            ns.expected.setdefault(name, path)
            ns.modules.setdefault(name, path)
        ns.grader |= GRADER_NAMES | set(GRADER_MODULES)
        ns.setup = (ns.setup | set(ns.expected)) - ns.grader
        pairs = [p for tree in locked for p in _pairs(tree)]
        for tree in student:
            ns.modules.update((name, path) for name, path, _ in imported(tree))
            ns.made |= _bound(tree)
            pairs += list(_pairs(tree))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    for t in _targets(node):
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
            if id(fn) not in methods and written_params(fn):
                ns.writers[fn.name] = written_params(fn)
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
        fn, args = name_of(node.func), node.args
        if fn in ("globals", "locals", "vars"):
            return f"vars({self.path(args[0]) or snippet(args[0], 20)})" if args else f"{fn}()"
        if fn == "getattr" and args and self.path(args[0]):
            attr = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else "?"
            return f"{self.path(args[0])}.{attr}"
        if fn == "type" and args and any(self.path(n) for n in ast.walk(args[0])):
            return f"type({snippet(args[0], 20)})"  # the class of a library object, e.g. torch.Tensor
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
        fn = name_of(node.func) if isinstance(node, ast.Call) else None
        return self.library_call(node) or (fn in DATA_CALLS and fn not in self.made)

    def may_be_module(self, node: ast.AST) -> bool:
        """Whether an expression other than a plain name may evaluate to a module."""
        if not isinstance(node, ast.Call):
            return any(self.path(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute)))
        func, root = node.func, root_of(node.func)
        own = isinstance(root, ast.Name) and root.id in self.made and not self.path(func)
        if self.library_call(node) or (own and name_of(func) not in self.returners):
            return False  # np.zeros(3), torch.nn.Linear(2, 2), the student's own function or method
        return not (name_of(func) == "type" and self.path(node) is None)  # type(self) is the student's class
