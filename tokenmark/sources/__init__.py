"""Edges that read workloads from local files: tables (JSONL, JSON, CSV, Parquet,
pickles on request), ShareGPT, the MLPerf datasets, traces, images and Hugging Face
tokenizers. Each third-party library is imported by exactly one module here
(pyarrow: :mod:`.parquet`, pandas: :mod:`.pickled`, Pillow: :mod:`.pil_images`,
tokenizers: :mod:`.hf_tokenizer`, jinja2: :mod:`.chat_template`), and only when used.
Nothing is ever downloaded: every loader takes a path the user gives.
"""
