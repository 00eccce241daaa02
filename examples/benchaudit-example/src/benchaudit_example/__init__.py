"""An example benchaudit plugin: the ``quiz`` benchmark, its ``.quiz`` format, a rule and a metric."""

__version__ = "0.1.0"
