"""Static checks of the Spack package in spack/ (no Spack needed).

The recipe is read with `ast`, never imported (its imports need Spack). check_recipe() returns the
problems it finds; the tests assert the real recipe has none and that doctored copies of it are
reported, so that every check can fail.
"""
import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SPACK_REPO = REPO / "spack" / "spack_repo" / "trident"
RECIPE = SPACK_REPO / "packages" / "trident" / "package.py"

# Variants the recipe gets from its base classes (the ones it may use in define_from_variant).
CUDA_PACKAGE_VARIANTS = {"cuda", "cuda_arch"}
# The build-system classes and where Spack 1.x (spack-packages' builtin repo) defines them.
BASES = {"CMakePackage": "spack_repo.builtin.build_systems.cmake",
         "CudaPackage": "spack_repo.builtin.build_systems.cuda"}


# --- a tiny YAML reader (python3-yaml is not a dependency of trident) -------------------------

def load_tiny_yaml(text):
    """Reads the subset of YAML used by Spack's repo files: nested mappings of `key: scalar` or
    `key:` and block lists of scalars (`- item`), indented with spaces, `#` comments. Raises
    ValueError on anything else."""
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise ValueError(f"line {number}: tab in indentation")
        lines.append((number, len(line) - len(line.lstrip(" ")), line.strip()))

    def scalar(number, value):
        if value[:1] in "\"'":
            if len(value) < 2 or value[-1] != value[0]:
                raise ValueError(f"line {number}: unterminated quoted scalar {value!r}")
            return value[1:-1]
        if value[:1] in "[{&*!|>%@`" or ": " in value or value.endswith(":"):
            raise ValueError(f"line {number}: unsupported YAML {value!r}")
        return value

    def block(i, indent):
        """Parses the block starting at lines[i] with exactly `indent`; returns (value, next i)."""
        is_list = lines[i][2].startswith("- ") or lines[i][2] == "-"
        result = [] if is_list else {}
        while i < len(lines):
            number, ind, content = lines[i]
            if ind < indent:
                break
            if ind > indent:
                raise ValueError(f"line {number}: unexpected indentation")
            if is_list:
                if not content.startswith("- "):
                    raise ValueError(f"line {number}: expected a list item")
                result.append(scalar(number, content[2:].strip()))
                i += 1
                continue
            match = re.fullmatch(r"([A-Za-z_][\w.-]*):(?:\s+(.*))?", content)
            if not match:
                raise ValueError(f"line {number}: expected `key:` or `key: value`, got {content!r}")
            key, value = match.group(1), match.group(2)
            if key in result:
                raise ValueError(f"line {number}: duplicate key {key!r}")
            i += 1
            if value is not None:
                result[key] = scalar(number, value)
            elif i < len(lines) and (lines[i][1] > ind or (lines[i][1] == ind
                                                          and lines[i][2].startswith("- "))):
                result[key], i = block(i, lines[i][1])
            else:
                result[key] = None
        return result, i

    if not lines:
        return None
    if lines[0][1] != 0:
        raise ValueError(f"line {lines[0][0]}: the document must start at column 0")
    value, i = block(0, 0)
    if i != len(lines):
        raise ValueError(f"line {lines[i][0]}: unexpected content")
    return value


def read_yaml(path):
    """load_tiny_yaml, cross-checked with PyYAML where it is installed."""
    text = path.read_text()
    data = load_tiny_yaml(text)
    try:
        import yaml
    except ImportError:
        return data
    assert yaml.safe_load(text) == data, f"{path}: the tiny reader and PyYAML disagree"
    return data


# --- CMake cache variables of the project -----------------------------------------------------

def cmake_declared(repo=REPO):
    """Names that trident's CMake files declare with option(NAME ...) or set(NAME ... CACHE ...):
    the top-level CMakeLists.txt, cmake/*.cmake and every CMakeLists.txt under src/ and tests/."""
    files = [repo / "CMakeLists.txt", *sorted((repo / "cmake").glob("*.cmake"))]
    for sub in ("src", "tests"):
        files += sorted((repo / sub).rglob("CMakeLists.txt"))
    names = set()
    for path in files:
        text = re.sub(r"#[^\n]*", "", path.read_text())
        names.update(re.findall(r"\boption\(\s*([A-Za-z_]\w*)", text, re.I))
        names.update(re.findall(r"\bset\(\s*([A-Za-z_]\w*)\b[^()]*?\bCACHE\b", text, re.I))
    return names


# --- the recipe, read with ast ----------------------------------------------------------------

def _text(node):
    """A str constant, or an f-string with its fields written as {expr}; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    return None


def _types(node):
    if node is None:
        return {"build", "link"}  # Spack's default dependency type
    if isinstance(node, (ast.Tuple, ast.List)):
        return {_text(e) for e in node.elts}
    return {_text(node)}


class Recipe:
    """The directives in the class body of a package.py, with the `when` they apply under."""

    def __init__(self, source, filename="package.py"):
        self.tree = ast.parse(source, filename)
        compile(source, filename, "exec")
        self.imports = {}  # name -> module, for `from module import name`
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = node.module
        classes = [n for n in self.tree.body if isinstance(n, ast.ClassDef)]
        self.cls = classes[0] if len(classes) == 1 else None
        self.variants = {}  # name -> {keyword: ast node}
        self.depends = []  # (spec, when, types, loop) where loop = (variable, iterable) or None
        self.conflicts = []  # (spec, when)
        self.defines = []  # (cmake variable, variant or None, call kind)
        if self.cls is None:
            return
        self._body(self.cls.body, when=None, loop=None)
        for node in ast.walk(self.cls):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                    and node.func.attr in ("define", "define_from_variant")):
                name = _text(node.args[0]) if node.args else None
                variant = None
                if node.func.attr == "define_from_variant":
                    variant = _text(node.args[1]) if len(node.args) > 1 else (name or "").lower()
                self.defines.append((name, variant, node.func.attr))

    @property
    def bases(self):
        return [ast.unparse(b) for b in self.cls.bases] if self.cls else []

    def _body(self, statements, when, loop):
        for node in statements:
            if isinstance(node, ast.With):
                inner = when
                for item in node.items:
                    call = item.context_expr
                    if isinstance(call, ast.Call) and ast.unparse(call.func) == "when":
                        inner = " ".join(filter(None, (inner, _text(call.args[0]))))
                self._body(node.body, inner, loop)
            elif isinstance(node, ast.For):
                self._body(node.body, when, (ast.unparse(node.target), ast.unparse(node.iter)))
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                self._directive(node.value, when, loop)

    def _directive(self, call, when, loop):
        name = ast.unparse(call.func)
        kwargs = {k.arg: k.value for k in call.keywords}
        first = _text(call.args[0]) if call.args else None
        own_when = _text(kwargs["when"]) if "when" in kwargs else None
        full_when = " ".join(filter(None, (when, own_when))) or None
        if name == "variant":
            self.variants[first] = kwargs
        elif name == "depends_on":
            self.depends.append((first, full_when, _types(kwargs.get("type")), loop))
        elif name == "conflicts":
            self.conflicts.append((first, full_when))


def _words(spec):
    """A spec or when string as a set of words, '+cuda cuda_arch={arch}' -> {'+cuda', 'cuda_arch={arch}'}."""
    return set(re.sub(r"\s*([+~])\s*", r" \1", spec or "").split())


def check_recipe(source, declared):
    """The problems of a recipe's source (an empty list when it is fine). `declared`: the CMake
    variables trident declares (cmake_declared())."""
    try:
        recipe = Recipe(source)
    except SyntaxError as e:
        return [f"syntax error: {e}"]
    problems = []
    if recipe.cls is None:
        return ["expected exactly one class in the recipe"]
    if recipe.cls.name != "Trident":
        problems.append(f"the package class is {recipe.cls.name}, Spack expects Trident")
    for base, module in BASES.items():
        if base not in recipe.bases:
            problems.append(f"class Trident does not derive from {base}")
        if recipe.imports.get(base) != module:
            problems.append(f"{base} must come from {module}, not {recipe.imports.get(base)}")
    if recipe.imports.get("*") != "spack.package":
        problems.append("missing `from spack.package import *`")

    # CMake variables: each one must exist in trident's CMake (or be a CMake standard variable).
    variants = set(recipe.variants) | CUDA_PACKAGE_VARIANTS
    for name, variant, kind in recipe.defines:
        if name is None:
            problems.append(f"{kind}: the CMake variable is not a string literal")
        elif not name.startswith("CMAKE_") and name not in declared:
            problems.append(f"{kind}({name!r}): trident's CMake declares no option or cache variable {name}")
        if kind == "define_from_variant" and variant not in variants:
            problems.append(f"define_from_variant({name!r}, {variant!r}): the recipe has no variant {variant!r}")
    from_variant = {name: variant for name, variant, kind in recipe.defines if kind == "define_from_variant"}
    for name, variant in (("TRIDENT_ENABLE_CUDA", "cuda"), ("TRIDENT_ENABLE_TESTS", "tests")):
        if from_variant.get(name) != variant:
            problems.append(f"{name} must be set with define_from_variant({name!r}, {variant!r})")

    # Variants.
    tests = recipe.variants.get("tests")
    if tests is None:
        problems.append("no variant 'tests'")
    elif not (isinstance(tests.get("default"), ast.Constant) and tests["default"].value is False):
        problems.append("variant 'tests' must default to False")
    arch = recipe.variants.get("cuda_arch")
    if arch is None or not (isinstance(arch.get("multi"), ast.Constant) and arch["multi"].value is False):
        problems.append("cuda_arch must be redeclared with multi=False (Kokkos takes one architecture)")
    if not any(_words(spec) == {"cuda_arch=none"} and "+cuda" in _words(when)
               for spec, when in recipe.conflicts):
        problems.append('missing conflicts("cuda_arch=none", when="+cuda")')

    # Dependencies.
    def has(name, pattern, when_words=None, types=None, loop=False):
        for spec, when, dep_types, dep_loop in recipe.depends:
            if spec is None or not re.fullmatch(pattern, spec.replace(" ", "")):
                continue
            if when_words is None and when is not None:
                continue
            if when_words is not None and not when_words(_words(when)):
                continue
            if types is not None and not types <= dep_types:
                continue
            if loop and not (dep_loop and dep_loop[1] == "CudaPackage.cuda_arch_values"
                             and f"cuda_arch={{{dep_loop[0]}}}" in _words(spec)
                             and f"cuda_arch={{{dep_loop[0]}}}" in _words(when)):
                continue
            return
        problems.append(f"missing dependency: {name}")

    has("mpi", r"mpi")
    has("hdf5+mpi", r"hdf5(@[^+~]*)?\+mpi")
    has("kokkos@4:", r"kokkos@4(\.[\d.]+)?:")
    has("tomlplusplus", r"tomlplusplus(@.*)?")
    has("blas", r"blas")
    has("cmake@3.20: (type build)", r"cmake@3\.2\d?:", types={"build"})
    has("googletest (type test, when +tests)", r"googletest(@.*)?",
        when_words=lambda w: w <= {"+tests"}, types={"test"})
    has("cuda when +cuda", r"cuda(@.*)?", when_words=lambda w: "+cuda" in w)
    has("nccl when +cuda", r"nccl(@.*)?", when_words=lambda w: "+cuda" in w)
    for dep in ("kokkos+cuda", "nccl"):
        has(f"{dep} cuda_arch=... forwarded for every CudaPackage.cuda_arch_values",
            re.escape(dep) + r"cuda_arch=\{\w+\}", when_words=lambda w: "+cuda" in w, loop=True)
    return problems


# --- tests ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def source():
    return RECIPE.read_text()


@pytest.fixture(scope="module")
def declared():
    return cmake_declared()


def test_layout_and_repo_yaml():
    assert RECIPE.is_file(), f"{RECIPE} is missing"
    config = read_yaml(SPACK_REPO / "repo.yaml")
    assert set(config) == {"repo"}, config
    repo = config["repo"]
    # Package API v2: the namespace is the directory under spack_repo/.
    assert repo.get("namespace") == SPACK_REPO.name == "trident", repo
    assert re.fullmatch(r"v2\.\d+", repo.get("api", "")), f"repo.yaml api {repo.get('api')!r} is not v2.x"
    assert (SPACK_REPO / "packages").is_dir()


def test_repo_index_if_present():
    """`spack repo add <git URL>` reads spack-repo-index.yaml at the root of the git repository."""
    index = REPO / "spack-repo-index.yaml"
    if not index.exists():
        pytest.skip("no spack-repo-index.yaml at the repository root")
    paths = read_yaml(index)["repo_index"]["paths"]
    assert isinstance(paths, list) and paths
    for path in paths:
        assert not Path(path).is_absolute(), path
        assert (REPO / path / "repo.yaml").is_file(), f"{path} names no package repository"


def test_recipe_has_no_problems(source, declared):
    assert check_recipe(source, declared) == []


def test_cmake_scan_finds_the_options():
    names = cmake_declared()
    assert {"TRIDENT_ENABLE_CUDA", "TRIDENT_ENABLE_TESTS", "TRIDENT_ENABLE_SANITIZERS",
            "TRIDENT_KERNEL_ARCH"} <= names
    assert "TRIDENT_PYTHON" not in names  # a plain set(), not a cache variable


def _doctor(source, old, new):
    assert old in source, f"the recipe no longer contains {old!r}: update this test"
    return source.replace(old, new, 1)


@pytest.mark.parametrize("old, new, expected", [
    ("args = [", 'args = [\n            self.define("TRIDENT_NO_SUCH_OPTION", True),',
     "TRIDENT_NO_SUCH_OPTION"),
    ('self.define_from_variant("TRIDENT_ENABLE_TESTS", "tests")',
     'self.define_from_variant("TRIDENT_ENABLE_TESTS", "testing")', "no variant 'testing'"),
    ('self.define_from_variant("TRIDENT_ENABLE_CUDA", "cuda")',
     'self.define("TRIDENT_ENABLE_CUDA", False)', "TRIDENT_ENABLE_CUDA must be set"),
    ('variant("tests", default=False', 'variant("tests", default=True', "'tests' must default"),
    ("multi=False", "multi=True", "multi=False"),
    ('conflicts("cuda_arch=none"', 'conflicts("cuda_arch=10"', "cuda_arch=none"),
    ('depends_on("mpi")', "", "missing dependency: mpi"),
    ('depends_on("hdf5+mpi")', 'depends_on("hdf5")', "missing dependency: hdf5+mpi"),
    ('depends_on("kokkos@4:")', 'depends_on("kokkos")', "missing dependency: kokkos@4:"),
    ('depends_on("tomlplusplus")', 'depends_on("toml11")', "missing dependency: tomlplusplus"),
    ('depends_on("blas")', "", "missing dependency: blas"),
    ('type=("build", "test")', 'type="build"', "missing dependency: googletest"),
    ('depends_on("nccl")', "", "missing dependency: nccl when +cuda"),
    ('depends_on(f"kokkos+cuda cuda_arch={arch}"', 'depends_on(f"kokkos+cuda cuda_arch=90"',
     "missing dependency: kokkos+cuda cuda_arch"),
    ("for arch in CudaPackage.cuda_arch_values", "for arch in ('90',)",
     "missing dependency: nccl cuda_arch"),
    ("(CMakePackage, CudaPackage)", "(CMakePackage)", "does not derive from CudaPackage"),
    ("from spack_repo.builtin.build_systems.cmake import", "from spack.build_systems.cmake import",
     "CMakePackage must come from"),
    ("def cmake_args(self):", "def cmake_args(self)", "syntax error"),
])
def test_doctored_recipe_is_reported(source, declared, old, new, expected):
    problems = check_recipe(_doctor(source, old, new), declared)
    assert any(expected in p for p in problems), problems


def test_declared_only_in_a_cmake_comment_is_not_declared(tmp_path):
    (tmp_path / "cmake").mkdir()
    (tmp_path / "CMakeLists.txt").write_text(
        '# option(TRIDENT_IN_A_COMMENT "x" ON)\nset(TRIDENT_PLAIN 1)\n'
        'set(TRIDENT_CACHED "a"\n    CACHE STRING "doc")\noption(TRIDENT_OPT "doc" OFF)\n')
    assert cmake_declared(tmp_path) == {"TRIDENT_CACHED", "TRIDENT_OPT"}


@pytest.mark.parametrize("text", [
    "repo:\n  namespace: trident\n   api: v2.2\n",  # bad indentation
    "repo:\n  namespace: [trident]\n",  # flow sequence: unsupported
    "repo:\n  namespace trident\n",  # no colon
    "repo:\n  namespace: 'trident\n",  # unterminated quote
    "repo:\n  api: v2.2\n  api: v2.0\n",  # duplicate key
    "repo:\n\tapi: v2.2\n",  # tab
])
def test_tiny_yaml_rejects_malformed(text):
    with pytest.raises(ValueError):
        load_tiny_yaml(text)


def test_tiny_yaml_reads_the_subset():
    assert load_tiny_yaml("# c\nrepo_index:\n  paths:\n  - spack/spack_repo/trident  # x\n"
                          "repo:\n  namespace: 'trident'\n  api: v2.2\n") == {
        "repo_index": {"paths": ["spack/spack_repo/trident"]},
        "repo": {"namespace": "trident", "api": "v2.2"}}
