"""The C extensions only: everything else about the distribution is in pyproject.toml."""

from setuptools import Extension, setup

# plain C loaded with ctypes: n-gram matching and TER (rerank/_native.py), the tuners' loops
# (rerank/tuning/_native.py); both include rerank/bleu_layout.h
setup(
    ext_modules=[
        Extension("rerank._kernels", ["rerank/_kernels.c"], extra_compile_args=["-O3"]),
        Extension(
            "rerank.tuning._kernels",
            ["rerank/tuning/_kernels.c"],
            include_dirs=["rerank"],
            depends=["rerank/bleu_layout.h"],
            extra_compile_args=["-O3"],
        ),
    ],
)
