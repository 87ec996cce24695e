# Spack recipe for psa: copy this directory into a Spack package repository as packages/psa/
# (`spack repo create myrepo && cp -r packaging/spack myrepo/packages/psa`), then
# `spack install psa` or `spack install psa +gpu ^openmpi`.
#
# The repository URL below is a placeholder: point `git` at the project's public repository.

from spack.package import *

try:
    # Spack 1.0 and later: the build systems live in the builtin package repository.
    from spack_repo.builtin.build_systems.cargo import CargoPackage
except ImportError:
    # Spack 0.22 and 0.23: spack.package exports CargoPackage.
    pass


class Psa(CargoPackage):
    """Distributed suffix array construction (pDC3, pCSS) on MPI, with the BWT and LCP array,
    FASTA/FASTQ input and pattern queries."""

    homepage = "https://github.com/OWNER/psa"
    git = "https://github.com/OWNER/psa.git"

    license("MIT OR Apache-2.0")

    version("main", branch="main")
    version("0.1.0", tag="v0.1.0")

    variant(
        "gpu",
        default=False,
        description="GPU backend (cargo feature gpu): CUDA's driver and NVRTC are loaded at run time",
    )

    # The locked dependencies need a recent Rust.
    depends_on("rust@1.85:", type="build")
    depends_on("mpi")
    # mpi-sys generates its MPI bindings with bindgen, which loads libclang.
    depends_on("llvm+clang", type="build")
    # NVRTC compiles the kernels when psa runs; the driver comes with the system's GPU driver.
    depends_on("cuda", type="run", when="+gpu")

    def setup_build_environment(self, env):
        """mpi-sys finds MPI through its compiler wrapper; bindgen finds libclang."""
        env.set("MPICC", self.spec["mpi"].mpicc)
        env.set("LIBCLANG_PATH", self.spec["llvm"].prefix.lib)

    @property
    def build_args(self):
        """Arguments to `cargo install`: the lockfile's versions, and the features asked for."""
        args = ["--locked", "-j", str(make_jobs)]
        if self.spec.satisfies("+gpu"):
            args += ["--features", "gpu"]
        return args

    def test_version(self):
        """psa --version names the installed version (and needs no MPI launcher)"""
        psa = which(self.prefix.bin.psa)
        out = psa("--version", output=str, error=str)
        assert out.startswith("psa "), out
        if not self.spec.satisfies("@main"):
            assert out.strip() == f"psa {self.spec.version}", out
