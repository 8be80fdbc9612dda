"""The demo tasks' documents: JSON-lines files beside this one, read wherever the harness runs.

A task YAML names its file with `dataset_kwargs: {file: NAME.jsonl}` and points
`custom_dataset` here; the harness then needs no dataset download and no path relative to the
current directory (`dataset_path: json` resolves `data_files` against the working directory).
"""

import json
from pathlib import Path


def load(file: str, **_):
    import datasets

    rows = [
        json.loads(line)
        for line in (Path(__file__).parent / file).read_text().splitlines()
        if line.strip()
    ]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
