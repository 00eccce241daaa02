"""The made-up questions the import fixtures' logs were made on (tests/fixtures/imports), as a data directory.

The files are named as the suites read them (``cybermetric/CyberMetric-80-v1.json``, ...), names the real,
non-commercially licensed benchmark files also have: so they are kept here as text and written into a temporary
folder when a test needs them, never committed under those names.  ``python tests/helpers/toy_benchmark_data.py
DIR`` writes them into DIR (what make_logs.py reads when it re-makes the logs).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import sys
import tempfile
from pathlib import Path

# Relative path -> the file's exact text (the logs' requests were rendered from these bytes).
FILES = {
    'cybermetric/CyberMetric-80-v1.json': '{\n  "questions": [\n    {\n      "question": "Which made-up port does the Tarn relay answer on?",\n      "answers": {\n        "A": "4100",\n        "B": "4200",\n        "C": "4300",\n        "D": "4400"\n      },\n      "solution": "A"\n    },\n    {\n      "question": "What does the pretend Lantern console encrypt first?",\n      "answers": {\n        "A": "logs",\n        "B": "keys",\n        "C": "mail",\n        "D": "backups"\n      },\n      "solution": "B"\n    },\n    {\n      "question": "Which fictional group maintains the Marlin vault?",\n      "answers": {\n        "A": "red",\n        "B": "blue",\n        "C": "purple",\n        "D": "gold"\n      },\n      "solution": "C"\n    },\n    {\n      "question": "How many shards does the invented Osprey store use?",\n      "answers": {\n        "A": "3",\n        "B": "5",\n        "C": "7",\n        "D": "9"\n      },\n      "solution": "D"\n    },\n    {\n      "question": "Which imaginary scanner finds the Fennel flaw?",\n      "answers": {\n        "A": "sieve",\n        "B": "comb",\n        "C": "rake",\n        "D": "net"\n      },\n      "solution": "A"\n    },\n    {\n      "question": "What guards the fabled Heron archive?",\n      "answers": {\n        "A": "a moat",\n        "B": "a code",\n        "C": "a dog",\n        "D": "a lock"\n      },\n      "solution": "B"\n    }\n  ]\n}\n',
    'mmlu-computer-security/computer_security_dev.csv': 'Which pretend cipher uses a wheel of nine runes?,Runewheel,Ninefold,Spoke,Dial,A\nWhat does the made-up Kestrel firewall block by default?,ssh,http,dns,ftp,B\nHow long is the fictional Wren token valid?,one hour,one day,one week,one year,C\nWhich invented office signs the Plover certificates?,audit,legal,ops,security,D\nWhat is stored in the imaginary Finch ledger?,logins,payments,alerts,tickets,A\n',
    'mmlu-computer-security/computer_security_test.csv': "Which made-up protocol does the Tarn relay speak?,Gopherwire,Zorplink,Quillnet,Emberpipe,A\nWhat colour is the pretend Lantern console's alarm?,red,blue,green,amber,D\nHow many keys does the fictional Marlin vault hold?,two,three,four,five,B\nWhich invented team audits the Osprey gateway?,north,south,east,west,C\nWhat does the imaginary Fennel scanner log first?,ports,users,files,hashes,A\nWhich fabled year saw the Heron worm?,1998,2002,2006,2010,C\n",
    'toy_generate.jsonl': '{"question": "[a] Which port does the made-up Gopherwire protocol listen on?", "answer": "A"}\n{"question": "[b] Which colour is the imaginary Zorp cipher\'s key card?", "answer": "B"}\n{"question": "[trunc] How many rounds does the fictional Quill hash run?", "answer": "C"}\n{"question": "[mumble] What year did the fabled Lantern worm appear?", "answer": "A"}\n',
}


def write_toy_data(root: Path) -> Path:
    """Write the toy data directory under ``root``; returns ``root``."""
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@functools.lru_cache(maxsize=1)
def toy_data_dir() -> Path:
    """The toy data directory, written once per process into a temporary folder removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="benchaudit-import-fixture-data-"))
    atexit.register(shutil.rmtree, root, True)
    return write_toy_data(root)


if __name__ == "__main__":
    print(write_toy_data(Path(sys.argv[1])))
