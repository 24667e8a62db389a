# Spack recipe for trident (Spack 1.x, package API v2). Register the repository with
#   spack repo add <trident checkout>/spack/spack_repo/trident
# and see README.md, "Install with Spack".

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Trident(CMakePackage, CudaPackage):
    """trident trains GPT-style transformers with 3D parallelism (tensor x pipeline x data) as
    one MPI program: a TOML input deck in, a run directory with an HDF5 timeline (steps, events,
    checkpoints) out. C++20 with Kokkos kernels, BLAS GEMMs and parallel HDF5; +cuda builds the
    GPU backend (Kokkos CUDA, cuBLAS GEMMs, NCCL collectives)."""

    # trident has no public repository (and no homepage) yet, so `git` is a placeholder: a site
    # points it at its clone in packages.yaml (trident: package_attributes: git: <URL or path>)
    # or builds a checkout in place with `spack develop --path /path/to/trident trident@main`.
    git = "file:///path/to/trident"

    version("main", branch="main")

    variant("tests", default=False, description="Build the GoogleTest suite (run with ctest)")

    # Kokkos takes exactly one CUDA architecture, so trident does too (as the kokkos recipe does).
    variant(
        "cuda_arch",
        description="CUDA architecture (one; forwarded to kokkos and nccl)",
        values=("none",) + CudaPackage.cuda_arch_values,
        default="none",
        multi=False,
        sticky=True,
        when="+cuda",
    )
    conflicts("cuda_arch=none", when="+cuda", msg="+cuda needs one cuda_arch, e.g. cuda_arch=90")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")

    depends_on("mpi")
    depends_on("hdf5+mpi")
    # Checked with Kokkos 4.6.1 (Serial backend) and a 4.6.99 snapshot with CUDA 13 (compiled only).
    depends_on("kokkos@4:")
    depends_on("tomlplusplus")
    # Header-only (safetensors headers, config.json of checkpoint.init = "hf:DIR"): needed to compile only.
    depends_on("nlohmann-json", type="build")
    # cmake/TridentBlas.cmake needs cblas.h and prefers OpenBLAS (BLA_VENDOR defaults to OpenBLAS).
    depends_on("blas")
    # find_package(GTest) runs at configure time when the tests are enabled, hence "build" too.
    depends_on("googletest", type=("build", "test"), when="+tests")

    with when("+cuda"):
        depends_on("cuda")
        depends_on("nccl")
        # The kernels are device lambdas (KOKKOS_LAMBDA), always enabled from Kokkos 4.1 on.
        depends_on("kokkos@4.1:")
    # The one cuda_arch is forwarded to every CUDA dependency.
    for arch in CudaPackage.cuda_arch_values:
        depends_on(f"kokkos+cuda cuda_arch={arch}", when=f"+cuda cuda_arch={arch}")
        depends_on(f"nccl cuda_arch={arch}", when=f"+cuda cuda_arch={arch}")

    def cmake_args(self):
        args = [
            self.define_from_variant("TRIDENT_ENABLE_CUDA", "cuda"),
            self.define_from_variant("TRIDENT_ENABLE_TESTS", "tests"),
            # The CPU kernels default to -march=x86-64-v3 (src/kernels/CMakeLists.txt). Spack's
            # compiler wrappers put the -march of the spec's target first on every compile line,
            # and a later -march of ours would win: kernels that an older target cannot run, or
            # that miss a newer target's instructions. Empty leaves the choice to `target=`.
            self.define("TRIDENT_KERNEL_ARCH", ""),
        ]
        if self.spec.satisfies("+cuda"):
            # trident's own CUDA kernels (src/gpu/*.cu), built for the same one architecture.
            args.append(self.define("CMAKE_CUDA_ARCHITECTURES", self.spec.variants["cuda_arch"].value))
        return args
