# lit configuration for slapoc's IR, frontend and diagnostics tests.
import os
import lit.formats

config.name = "slapoc"
config.test_format = lit.formats.ShTest(not lit_config.isWindows)
config.suffixes = [".mlir", ".test", ".sched"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.slapo_obj_root, "test")
config.excludes = ["models", "unit", "bench", "fuzz", "Inputs", "CMakeLists.txt", "lit.cfg.py"]

tool_dirs = [
    os.path.join(config.slapo_obj_root, "tools", "slapo-merge"),
    os.path.join(config.slapo_obj_root, "tools", "slapo-opt"),
    os.path.join(config.slapo_obj_root, "tools", "slapo-translate"),
    os.path.join(config.slapo_obj_root, "tools", "slapoc"),
    config.llvm_tools_dir,
]
config.environment["PATH"] = os.pathsep.join(tool_dirs + [config.environment.get("PATH", "")])
# LibTorch uses one thread unless told; keep test runs deterministic and light.
config.environment["OMP_NUM_THREADS"] = "1"

# Python with torch is the Debian one; HF transformers lives in third_party/.pydeps.
pydeps = os.path.join(config.slapo_src_root, "third_party", ".pydeps")
config.environment["PYTHONPATH"] = pydeps
config.substitutions.append(("%python", "/usr/bin/python3"))
config.substitutions.append(("%models", os.path.join(config.slapo_src_root, "test", "models")))
if os.path.isdir(os.path.join(pydeps, "transformers")):
    config.available_features.add("transformers")

# slapoc was built with the CUDA backend: --target=cuda compiles and links
# (tests that need it say REQUIRES: cuda, and lit lists them as unsupported
# elsewhere).
if config.slapo_cuda_backend:
    config.available_features.add("cuda")

# Generated C++ is compiled against the runtime's headers (and libraries).
config.substitutions.append(("%runtime_include", os.path.join(config.slapo_src_root, "runtime", "include")))
config.substitutions.append(("%runtime_build", os.path.join(config.slapo_obj_root, "runtime")))

# Rank programs run under mpirun as users run them (CI runs as root).
config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe --bind-to none"))

# oneDNN 2.6 has a bf16 matmul only on CPUs with AVX-512 (its avx512_core:
# F, BW, VL and DQ). The tests of that path require this feature, and a CPU
# without it says here why they do not run.
with open("/proc/cpuinfo") as cpuinfo:
    cpu_flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                      if line.startswith("flags")), [])
missing_flags = [flag for flag in ("avx512f", "avx512bw", "avx512vl", "avx512dq")
                 if flag not in cpu_flags]
if missing_flags:
    lit_config.note("skipped: CPU lacks %s: the tests of oneDNN's bf16 matmul "
                    "(REQUIRES: onednn-bf16-matmul) are UNSUPPORTED" % ", ".join(missing_flags))
else:
    config.available_features.add("onednn-bf16-matmul")

# The link lines of the build: the layering test reads slapoc's from Ninja.
config.substitutions.append(("%slapo_build", config.slapo_obj_root))
if os.path.exists(os.path.join(config.slapo_obj_root, "build.ninja")):
    config.available_features.add("ninja-build")
else:
    lit_config.note("skipped: the build is not Ninja's: test/Driver/layering.test "
                    "(REQUIRES: ninja-build) is UNSUPPORTED")
