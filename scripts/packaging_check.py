#!/usr/bin/env python3
"""Checks the recipes in packaging/ as far as a machine without Spack, conda-build or Apptainer
can (scripts/packaging-check.sh runs it; CI too):

- every recipe names Cargo.toml's version, and `psa --version` (and -V) prints `psa VERSION`;
- Spack: package.py parses, `class Psa(CargoPackage)` with its directives (mpi, llvm, rust, the
  gpu variant); loaded against stand-ins for Spack's names, its `cargo install` arguments with
  and without +gpu are flags cargo accepts, and its stand-alone test passes on the built psa;
- bioconda: meta.yaml parses as YAML once its Jinja placeholders are rendered simply, with
  openmpi pinned in host and run, Rust and clang in build; build.sh is valid shell whose
  `cargo install` flags cargo accepts; the test commands pass on the built psa;
- Apptainer: psa.def's header (Bootstrap, From) and sections parse, its %files exist, %post is
  valid shell that installs with cargo, and %test (after %environment) passes on the built psa.

The builds themselves (cargo install into a prefix, an image) take far longer than a CI step:
instead `cargo tree --locked --offline` checks that the lockfile needs no change, as `--locked`
asks.

Usage: packaging_check.py PSA_BINARY
"""

import ast
import os
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "packaging"
FAILURES = []


def check(ok, what):
    """Records a failed check (all are run, then reported together)."""
    print(f"packaging-check: {'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        FAILURES.append(what)


def run(cmd, env_path=None, shell=None):
    """Runs a command (a list, or a script for `shell`), PATH led by `env_path`: (status, output)."""
    env = dict(os.environ)
    if env_path:
        env["PATH"] = f"{env_path}:{env['PATH']}"
    args = [shell, "-c", cmd] if shell else cmd
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def cargo_version():
    """The package version in Cargo.toml."""
    with open(ROOT / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["package"]["version"]


def install_flags():
    """The options `cargo install` accepts (from its --help)."""
    _, text = run(["cargo", "install", "--help"])
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[A-Za-z])\b", text))


def check_flags(args, accepted, what):
    """Every option among `args` is one `cargo install` accepts."""
    unknown = [a for a in args if a.startswith("-") and a.split("=")[0] not in accepted]
    check(not unknown, f"{what}: cargo install accepts {' '.join(args)} (unknown: {unknown})")


def check_binary(psa, version):
    """`psa --version` and `-V` print `psa VERSION`."""
    for flag in ["--version", "-V"]:
        r = subprocess.run([psa, flag], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and r.stdout == f"psa {version}\n",
              f"{psa} {flag} prints 'psa {version}' (got {r.stdout!r}, status {r.returncode})")


def spack_stand_ins(bindir):
    """A module `spack.package` with stand-ins for the names package.py uses."""
    calls = {"version": [], "variant": [], "depends_on": [], "license": []}

    def directive(name):
        return lambda *a, **k: calls[name].append((a, k))

    def which(path):
        def call(*args, output=None, error=None):
            r = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            return r.stdout + (r.stderr if error is str else "")
        return call

    mod = types.ModuleType("spack.package")
    mod.CargoPackage = type("CargoPackage", (), {})
    mod.which = which
    mod.make_jobs = 4
    for name in calls:
        setattr(mod, name, directive(name))
    mod.__all__ = ["CargoPackage", "which", "make_jobs", *calls]
    return mod, calls


class Spec:
    """A stand-in for a concrete Spack spec: its version and variants."""

    def __init__(self, version, gpu):
        self.version = version
        self.gpu = gpu

    def satisfies(self, constraint):
        return {"+gpu": self.gpu, "~gpu": not self.gpu, "@main": self.version == "main"}[constraint]


def check_spack(version, bindir, accepted):
    """package.py: its structure (by its syntax tree) and its methods against stand-ins."""
    path = PKG / "spack" / "package.py"
    source = path.read_text()
    tree = ast.parse(source, str(path))
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Psa"]
    bases = [ast.unparse(b) for b in classes[0].bases] if classes else []
    check(bases == ["CargoPackage"], f"spack: class Psa(CargoPackage) (bases {bases})")
    mod, calls = spack_stand_ins(bindir)
    sys.modules["spack"] = types.ModuleType("spack")
    sys.modules["spack.package"] = mod
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    deps = {a[0].split("@")[0].split("+")[0] for a, _ in calls["depends_on"]}
    check({"mpi", "llvm", "rust", "cuda"} <= deps, f"spack: depends_on mpi, llvm, rust, cuda (+gpu): {sorted(deps)}")
    versions = [a[0] for a, _ in calls["version"]]
    check(version in versions, f"spack: version {version} among {versions}")
    check(any(a[0] == "gpu" for a, _ in calls["variant"]), "spack: a gpu variant")
    psa_class = namespace["Psa"]
    for gpu in [False, True]:
        pkg = psa_class.__new__(psa_class)
        pkg.spec = Spec(version, gpu)
        pkg.prefix = types.SimpleNamespace(bin=types.SimpleNamespace(psa=Path(bindir) / "psa"))
        args = pkg.build_args
        check(("gpu" in args) == gpu and "--locked" in args, f"spack: build_args {'+' if gpu else '~'}gpu: {args}")
        check_flags(["--root", "out", "--path", ".", *args], accepted, "spack")
        try:
            pkg.test_version()
            check(True, f"spack: test_version passes on {bindir}/psa")
        except AssertionError as e:
            check(False, f"spack: test_version on {bindir}/psa: {e}")


def render_jinja(text):
    """meta.yaml with its Jinja rendered simply: `{% set %}` variables substituted, any other
    `{{ expression }}` replaced by a token naming it, other `{% %}` lines dropped."""
    values = dict(re.findall(r'{%\s*set\s+(\w+)\s*=\s*"([^"]*)"\s*%}', text))
    text = re.sub(r"{%.*?%}", "", text)

    def expr(m):
        e = m.group(1).strip()
        return values.get(e, "JINJA:" + re.sub(r"[^\w.,=]+", "_", e).strip("_"))

    return re.sub(r"{{(.*?)}}", expr, text)


def check_bioconda(version, bindir, accepted):
    """meta.yaml (rendered) and build.sh; the test commands on the built psa."""
    meta = yaml.safe_load(render_jinja((PKG / "bioconda" / "meta.yaml").read_text()))
    check(meta["package"] == {"name": "psa", "version": version}, f"bioconda: package {meta['package']}")
    req = meta["requirements"]
    check(any(r.startswith("openmpi ") for r in req["host"]), f"bioconda: openmpi pinned in host: {req['host']}")
    check(any("pin_compatible" in r and "openmpi" in r for r in req["run"]), f"bioconda: openmpi pinned in run: {req['run']}")
    build = " ".join(req["build"])
    check("compiler_rust" in build and "clang" in build, f"bioconda: rust and clang in build: {req['build']}")
    commands = meta["test"]["commands"]
    check("psa --version" in commands, "bioconda: psa --version among the test commands")
    for c in commands:
        status, out = run(c, bindir, "bash")
        check(status == 0, f"bioconda test: {c}" + (f" ({out.strip()[-300:]})" if status else ""))
    script = PKG / "bioconda" / "build.sh"
    status, out = run(["bash", "-n", str(script)])
    check(status == 0, f"bioconda: build.sh is valid bash {out.strip()}")
    install = [l.split() for l in script.read_text().splitlines() if l.startswith("cargo install")]
    check(len(install) == 1, "bioconda: build.sh runs cargo install once")
    for line in install:
        check_flags(line[2:], accepted, "bioconda build.sh")
    if "cargo-bundle-licenses" in script.read_text():
        check("cargo-bundle-licenses" in build, "bioconda: cargo-bundle-licenses in build")


def parse_def(text):
    """An Apptainer definition: its header's keys and its sections' bodies, by name."""
    header, sections, name, twice = {}, {}, None, []
    for line in text.splitlines():
        m = re.match(r"^%(\w+)\s*$", line)
        if m:
            name = m.group(1)
            if name in sections:
                twice.append(name)
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition(":")
            if not sep or key.strip() not in {"Bootstrap", "From", "Stage"}:
                twice.append(f"header line {line!r}")
            header[key.strip()] = value.strip()
    check(not twice, f"apptainer: each section once, header lines 'Key: value' (not: {twice})")
    return header, {k: "\n".join(v) for k, v in sections.items()}


def check_apptainer(version, bindir, accepted):
    """psa.def's header and sections; %post's shell and install; %test on the built psa."""
    header, sections = parse_def((PKG / "apptainer" / "psa.def").read_text())
    check(header.get("Bootstrap") == "docker" and header.get("From") == "debian:12", f"apptainer: header {header}")
    want = {"files", "post", "environment", "runscript", "test", "labels"}
    check(want <= set(sections), f"apptainer: sections {sorted(sections)} include {sorted(want)}")
    for line in filter(str.strip, sections.get("files", "").splitlines()):
        src = line.split()[0]
        check((ROOT / src).exists(), f"apptainer: %files source {src} exists")
    labels = dict(l.strip().split(None, 1) for l in sections.get("labels", "").splitlines() if l.strip())
    check(labels.get("Version") == version, f"apptainer: label Version {labels.get('Version')}")
    post = sections.get("post", "")
    status, out = run(["sh", "-n", "-c", post])
    check(status == 0, f"apptainer: %post is valid sh {out.strip()}")
    install = [l.split() for l in post.splitlines() if "cargo install" in l]
    check(len(install) == 1, "apptainer: %post runs cargo install once")
    for line in install:
        check_flags(line[line.index("install") + 1:], accepted, "apptainer %post")
    body = sections.get("environment", "") + "\n" + sections.get("test", "")
    status, out = run("set -e\n" + body, bindir, "sh")
    check(status == 0, f"apptainer: %test passes on {bindir}/psa" + (f" ({out.strip()[-300:]})" if status else ""))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    psa = Path(sys.argv[1]).resolve()
    bindir = str(psa.parent)
    version = cargo_version()
    accepted = install_flags()
    check_binary(str(psa), version)
    status, out = run(["cargo", "tree", "--locked", "--offline", "--depth", "0", "-e", "normal"])
    check(status == 0, f"Cargo.lock needs no change (cargo install --locked) {out.strip()[-300:] if status else ''}")
    check_spack(version, bindir, accepted)
    check_bioconda(version, bindir, accepted)
    check_apptainer(version, bindir, accepted)
    if FAILURES:
        sys.exit(f"packaging-check: {len(FAILURES)} check(s) failed")
    print("packaging-check: all passed")


if __name__ == "__main__":
    main()
