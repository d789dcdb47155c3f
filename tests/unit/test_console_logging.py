"""The console shows lakecdc's lines and the libraries' errors; ``-v`` adds lakecdc's INFO lines and the
libraries' warnings. Spark's level reaches the JVM through a log4j2 file given at launch
(``pipelines.spark_logs``), so no Spark is started here."""

from __future__ import annotations

import logging

import pytest

from pipelines import cli
from pipelines.spark_logs import QUIET_LOGGERS, log4j2_file, log4j2_properties, spark_log_level


@pytest.fixture
def levels(monkeypatch):
    """The loggers main() sets, restored after the test (main() runs in this process)."""
    names = ("pipelines", *cli.LIBRARY_LOGGERS)
    before = {name: logging.getLogger(name).level for name in names}
    monkeypatch.delenv("LAKECDC_SPARK_LOG_LEVEL", raising=False)
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


def test_spark_is_at_error_on_a_console_and_at_warn_with_v_or_under_spark_submit(levels, monkeypatch):
    logging.getLogger("pipelines").setLevel(logging.WARNING)
    assert spark_log_level() == "ERROR"
    assert spark_log_level(submitted=True) == "WARN"
    logging.getLogger("pipelines").setLevel(logging.INFO)  # what `lakecdc -v` sets
    assert spark_log_level() == "WARN"
    monkeypatch.setenv("LAKECDC_SPARK_LOG_LEVEL", "info")
    assert spark_log_level() == "INFO" and spark_log_level(submitted=True) == "INFO"


@pytest.mark.parametrize("verbose", [False, True])
def test_main_sets_the_libraries_python_loggers(levels, verbose, capsys):
    assert cli.main([*(["-v"] if verbose else []), "formats"]) == 0
    expected = logging.WARNING if verbose else logging.ERROR
    for name in cli.LIBRARY_LOGGERS:
        assert logging.getLogger(name).level == expected, name
    assert spark_log_level() == ("WARN" if verbose else "ERROR")


def test_the_log4j2_file_sets_the_root_the_shell_and_the_quiet_loggers(tmp_path):
    text = log4j2_properties("ERROR")
    props = dict(line.split(" = ", 1) for line in text.splitlines())
    assert props["rootLogger.level"] == "error"
    assert props["appender.console.target"] == "SYSTEM_ERR"
    # PySpark's driver counts as a shell: its logger at another level than the root's prints "Setting default log level"
    assert props["logger.shell.name"] == "org.apache.spark.api.python.PythonGatewayServer"
    assert props["logger.shell.level"] == "error"
    configured = {
        props[key]: props[key.replace(".name", ".level")]
        for key in props
        if key.startswith("logger.") and key.endswith(".name")
    }
    for name, level in QUIET_LOGGERS.items():
        assert configured[name] == level.lower()
    path = log4j2_file(tmp_path, "WARN")
    assert path.name == "log4j2-warn.properties" and path.read_text() == log4j2_properties("WARN")
    assert log4j2_file(tmp_path, "WARN") == path and list(tmp_path.iterdir()) == [path]


def test_pyspark_query_context_loggers_survive_a_lost_race():
    """A plain Logger under PySpark's query-context name (what two threads raising at once can leave) makes
    every later exception fail in its own logging (``unexpected keyword argument 'errorClass'``); made at
    session start, the names hold PySparkLoggers that take the keywords."""
    import logging

    from pyspark.logger import PySparkLogger

    from pipelines.spark_logs import QUERY_CONTEXT_LOGGERS, query_context_loggers

    name = QUERY_CONTEXT_LOGGERS[0]
    logging.Logger.manager.loggerDict.pop(name, None)
    plain = logging.getLogger(name)  # the race's outcome
    assert not isinstance(plain, PySparkLogger)
    query_context_loggers()
    for each in QUERY_CONTEXT_LOGGERS:
        made = PySparkLogger.getLogger(each)
        assert isinstance(made, PySparkLogger), each
        seen: list[logging.LogRecord] = []
        catcher = logging.Handler()
        catcher.emit = seen.append
        made.addHandler(catcher)
        try:
            made.exception("a message", errorClass="SOME_CLASS")  # the call PySpark's exceptions make
        finally:
            made.removeHandler(catcher)
        assert [r.getMessage() for r in seen] and "SOME_CLASS" in str(seen[0].__dict__), each
