"""Dev tools, beside the runtime: the source simulator and reference model, the demo's traffic,
a local Kafka broker and client helpers, Data Docs asset vendoring.

They may import the runtime; no runtime module imports them (only ``pipelines.cli`` does, inside
its dev subcommands). They are kept out of the wheel deployed to Databricks
(``[tool.setuptools.packages.find]`` in pyproject.toml) and work from a source checkout
(``pip install -e .``).
"""
