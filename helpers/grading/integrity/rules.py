"""What the integrity scan looks for: the names the grading relies on, the modules, calls and paths
that count as network, processes, files, dynamic code or kernel hooks, the hidden places of the
grading machine, and which IPython magics are everyday ones. Tables only, and the one question
asked of them everywhere: which hidden place the paths a line or call holds lead into."""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable

# ------------------------------------------------------------------ what the grading relies on

# Names the grade cells rely on, besides the checks the release's locked cells import.
GRADER_NAMES = {"quiet", "fresh_seeds", "reference", "CheckFailed"}
# Imported from the checks for the learner alone: no grade cell calls them.
LEARNER_NAMES = {"hint"}
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

# ------------------------------------------------------------------ modules and calls by what they reach

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
MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "append", "insert", "extend", "remove",
            "__setitem__", "__delitem__"}
DYNAMIC_NAMES = {"exec", "eval", "compile", "__import__"}
CODE_PATHS = ("pickle.loads", "marshal.loads", "types.FunctionType", "types.CodeType", "runpy.", "code.")
# Settings students change honestly; writing them patches nothing the grading reads.
ALLOWED_WRITES = ("matplotlib.rcParams", "matplotlib.pyplot.rcParams", "torch.backends.", "os.environ",
                  "pandas.options.", "IPython.core.interactiveshell.InteractiveShell.ast_node_interactivity")

# ------------------------------------------------------------------ the kernel and the browser

FRAME_PATHS = {"sys._getframe", "inspect.currentframe", "inspect.stack", "inspect.getouterframes",
               "gc.get_referrers", "gc.get_objects"}  # reach the grader's objects through the interpreter
KERNEL_PATHS = tuple(FRAME_PATHS | {"sys.settrace", "sys.setprofile", "sys.addaudithook", "sys.monitoring",
                                    "sys._current_frames", "threading.settrace", "threading.setprofile",
                                    "inspect.trace", "inspect.getinnerframes", "gc.get_referents"})
FRAME_ATTRS = {"f_globals", "f_locals", "f_builtins", "f_back", "gi_frame", "tb_frame", "cr_frame"}
# The shell's hooks, flagged on any object; on get_ipython() every attribute but SHELL_CALLS is.
SHELL_ATTRS = {"set_custom_exc", "showtraceback", "showsyntaxerror", "run_cell", "run_cell_async", "run_code",
               "run_ast_nodes", "user_ns", "user_global_ns", "register_magic_function", "register_magics",
               "set_hook", "input_transformers_post", "input_transformers_cleanup", "ast_transformers",
               "custom_exceptions", "InteractiveTB"}
SHELL_CALLS = {"run_line_magic": "%{0} {1}", "magic": "%{0}", "run_cell_magic": "%%{0} {1}\n{2}",
               "system": "!{0}", "getoutput": "!{0}", "system_piped": "!{0}", "system_raw": "!{0}"}
JS_NAMES = {"Javascript", "display_javascript"}
SCRIPT = re.compile(r"<script|javascript:|application/javascript|<[^>]*\son[a-z]+\s*=", re.I)
# Markup that runs script, or loads a page or a plugin, in the browser that shows it (read with a
# real HTML parser: ``markup``). Attributes whose name starts with "on" are event handlers.
ACTIVE_TAGS = {"script", "iframe", "frame", "frameset", "object", "embed", "applet", "portal", "base"}
SCRIPT_SCHEMES = ("javascript:", "vbscript:", "livescript:")
# data: URLs an <img> may show: an image never runs script, an SVG one included; any other data:
# URL (data:text/html, or SVG in a frame or an object) is a page of its own.
IMAGE_DATA = ("data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp", "data:image/svg+xml")
# Outputs whose type is script: the browser runs them as they are.
SCRIPT_OUTPUTS = {"application/javascript", "text/javascript", "application/x-javascript"}
MARKUP_OUTPUTS = {"text/html", "image/svg+xml"}  # read as HTML; text/markdown is rendered first

# ------------------------------------------------------------------ IPython magics, by name (lower case)

# Everyday ones are no finding; the rest are reviewed.
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

# ------------------------------------------------------------------ hidden places

# Places a submission has no business reading or writing, by folder name -> in a student's words;
# the first that a path names is the one reported.
HIDDEN_DIRS = {"solutions": "the course's solutions", "source_with_tests": "the instructor's notebooks",
               "submitted": "other students' work", "autograded": "other students' work",
               "exchange": "the course's exchange folder", "grading": "the grading folder"}


def _place(path: str) -> str | None:
    """Which hidden place of the grading machine a path names, in words, or None."""
    parts = [p.lower() for p in path.replace("\\", "/").split("/")]
    if any(p.startswith("gradebook") for p in parts):
        return "the gradebook"
    # Home folders are left out: a student's own data may live in theirs, and the sandbox hides
    # the grading machine's anyway; reading them stays a file-access finding to review.
    return next((words for folder, words in HIDDEN_DIRS.items() if folder in parts), None)


def hidden_place(paths: Iterable[str]) -> str | None:
    """The hidden place named by the first of these paths that names one, in words, or None."""
    return next(filter(None, map(_place, paths)), None)
