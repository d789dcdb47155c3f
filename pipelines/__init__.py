"""lakecdc: CDC messages from OMS, DataWorks, DTS and DRS into Delta mirror tables."""

__version__ = "0.1.0"
