"""The bodies of the ``lakecdc`` subcommands, one module per group; the parser is :mod:`pipelines.cli`.

* :mod:`~pipelines.cli_commands.pipeline`: run, status, rebuild, replay, export.
* :mod:`~pipelines.cli_commands.formats`: decode, formats.
* :mod:`~pipelines.cli_commands.dq`: dq report / check.
* :mod:`~pipelines.cli_commands.dev`: the dev tools demo, soak, produce, kafka (``pipelines.testing``,
  which the wheel leaves out).
* :mod:`~pipelines.cli_commands.shared`: progress lines and the configurations the commands share.

Each body imports what its command needs (the runtime, Spark, the dev tools) inside the function, so
``lakecdc --help`` stays quick and the wheel without the dev tools runs every other command.
"""
