"""What pyproject.toml cannot say: the packages, with ``examples/`` shipped under another name.

The wheel holds the code (``evalcore``, ``apps``, ``evalsite``) with its package data (templates,
static files, migrations, the ``evalsite init`` template) and the example suites of ``examples/``
as the data package ``evalsite_examples`` (a checkout keeps its ``examples/...`` paths;
``evalsite.paths.examples_dir`` finds either). Everything else is in pyproject.toml.
``tests/test_wheel.py`` checks the wheel holds every file of these folders.
"""

from setuptools import find_namespace_packages, setup

SKIP = ["*__pycache__*"]
CODE = find_namespace_packages(include=["evalcore*", "apps*", "evalsite*"], exclude=SKIP)
EXAMPLES = ["evalsite_examples", *(f"evalsite_examples.{p}" for p in find_namespace_packages("examples", exclude=SKIP))]
DATA = [
    # templates, static files, the init template's .env / .gitignore (stored without their dot)
    *("*.html", "*.js", "*.css", "*.svg", "env", "gitignore"),
    # example sets, recorded data, peers' files, CI examples, docs
    *("*.json", "*.jsonl", "*.csv", "*.parquet", "*.arrow", "*.gz", "*.toml", "*.yaml", "*.yml", "*.md"),
]

setup(
    packages=CODE + EXAMPLES,
    package_dir={"evalsite_examples": "examples"},
    package_data={"": DATA},
)
