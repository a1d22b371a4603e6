"""OpenTelemetry for Evalsite traces, both ways, with the GenAI semantic conventions.

A trace here is Evalsite's flat event log (:mod:`evalcore.tracing`: ``span_begin`` /
``span_end`` pairs and point events). The modules map it to and from OTLP spans:

* :mod:`evalcore.otel.model`: the plain span values (:class:`~evalcore.otel.model.OtelSpan`)
  both directions share, and the id rules (Evalsite ids -> 16/8-byte hex ids, stable).
* :mod:`evalcore.otel.semconv`: the attribute names (``gen_ai.*`` and ``evalsite.*``).
* :mod:`evalcore.otel.messages`: chat messages <-> the GenAI ``parts`` messages (and the older
  ``gen_ai.prompt`` / ``gen_ai.completion`` forms, read only).
* :mod:`evalcore.otel.export`: trace events -> spans with GenAI attributes.
* :mod:`evalcore.otel.ingest`: spans -> trace events, and a trace's summary (input, answer,
  model, tokens, tool calls) read back from its events.
* :mod:`evalcore.otel.otlp`: the OTLP/HTTP wire (protobuf and JSON requests decoded, responses
  encoded), through ``opentelemetry-proto``.
* :mod:`evalcore.otel.sdk`: spans -> the SDK's ``ReadableSpan`` and the official OTLP/HTTP
  exporter (``opentelemetry-exporter-otlp-proto-http``).

Django-free like the rest of the engine; the stores and the endpoint live in ``apps.traces``.
"""
