"""Third-party metric libraries (Ragas, DeepEval, autoevals) run as Evalsite scorers.

:mod:`~evalcore.scorers.libraries.scorer` holds the scorers (``ragas``, ``deepeval``,
``autoevals``); :mod:`~evalcore.scorers.libraries.process` the worker process they share;
:mod:`~evalcore.scorers.libraries.worker` the script that process runs, in the Python that has the
library (it never imports Evalsite).
"""

from evalcore.scorers.libraries.scorer import AutoevalsMetric, DeepEvalMetric, LibraryMetric, RagasMetric

__all__ = ["AutoevalsMetric", "DeepEvalMetric", "LibraryMetric", "RagasMetric"]
