"""Write the quiz benchmark's questions: ``benchaudit-example-data [DATA_DIR]``.

The questions are made up here (port numbers of well-known services), drawn with a fixed seed, so
every machine gets the same file: ``DATA_DIR/quiz/questions.quiz`` (DATA_DIR: the argument, else
``$BENCHAUDIT_DATA``, else ``~/.cache/benchaudit/datasets``, where benchaudit reads data from).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

PORTS = {
    "SSH": 22,
    "SMTP": 25,
    "DNS": 53,
    "HTTP": 80,
    "Kerberos": 88,
    "POP3": 110,
    "NTP": 123,
    "IMAP": 143,
    "SNMP": 161,
    "LDAP": 389,
    "HTTPS": 443,
    "SMB": 445,
    "LDAPS": 636,
    "IMAPS": 993,
    "MSSQL": 1433,
    "MySQL": 3306,
    "RDP": 3389,
    "PostgreSQL": 5432,
}
LABELS = "ABCD"


def questions(seed: int = 34) -> str:
    """The ``.quiz`` text: one question per service, four options, the gold placed at random."""
    rng = random.Random(seed)
    out = []
    for i, (service, port) in enumerate(sorted(PORTS.items()), 1):
        wrong = rng.sample(sorted(set(PORTS.values()) - {port}), 3)
        options = wrong[:]
        gold = rng.randrange(4)
        options.insert(gold, port)
        out.append(
            f"[q{i:03d}]\nquestion = Which TCP or UDP port does {service} use by default?\n"
            + "".join(f"{LABELS[j]} = {p}\n" for j, p in enumerate(options))
            + f"answer = {LABELS[gold]}\n"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(
        args[0] if args else os.environ.get("BENCHAUDIT_DATA") or Path.home() / ".cache" / "benchaudit" / "datasets"
    )
    target = root / "quiz" / "questions.quiz"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(questions(), encoding="utf-8")
    print(f"wrote {target} ({len(PORTS)} questions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
