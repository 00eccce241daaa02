"""``benchaudit judge-agreement``: how far two readers of the same outputs agree.

Two modes:

- ``judge-agreement RUN_A RUN_B`` (two judges, or a judge run against a regex-pipeline run):
  records are paired by ``(benchmark, task, question_id, model, variant)`` and each side's
  *label* compared.  For grading the label is the judge's verdict (``CORRECT``/``INCORRECT``)
  or, for a run without a grading judge, ``CORRECT``/``INCORRECT`` from the record's
  ``correct``; for extraction it is the record's ``prediction`` (``None`` -> ``"NONE"``).
- ``judge-agreement RUN`` (within one run that used judge extraction): the judge's verdict
  against ``regex_prediction``, what the pipeline's regex rule would have read.

Judge information is read from ``rec["judge"] = {"model", "purpose": "extraction"|"grading",
"prompt_version", "raw_output", "parse_status": "json"|"fallback"|"failed", "verdict"}``.
A judge call whose verdict is ``None`` (its output could not be parsed) is not a label: such
items are left out of the pairs and counted as ``n_judge_failed``.

Labels are compared after the normalisation of :func:`.goldaudit.normalize_answer`
(case-insensitive; multi-letter MCQ answers as sorted letter sets).

Reported: pairs, raw agreement, Cohen's kappa, the confusion table, per-model score under
A and under B (difference in percentage points), per-task agreement, and strata over the
regex/judge extraction data when records carry it: items where the regex found nothing,
and items where the regex and the judge disagree (count and A-vs-B agreement within each).

Cohen's kappa is ``(p_o - p_e) / (1 - p_e)`` from the confusion matrix: ``p_o`` the share
on the diagonal, ``p_e`` the sum over labels of the product of the two marginal shares.
scikit-learn's ``cohen_kappa_score`` is used when scikit-learn is installed; it is not a
dependency of this project (and scipy has no kappa), so otherwise the same formula is
computed here.  When ``p_e == 1`` (both sides gave one and the same label throughout)
kappa is undefined and reported as ``None``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_benchaudit.common.errors import BenchauditError, cli_exit_code
from pytest_benchaudit.audit.goldaudit import normalize_answer
from pytest_benchaudit.audit.offline import OfflineError, load_run

__all__ = ["JudgeAgreementError", "cohen_kappa", "pair_runs", "within_run", "agreement_report",
           "add_judge_agreement_parser", "run_judge_agreement", "KAPPA_METHOD"]

try:  # optional: only if already installed; never a dependency
    from sklearn.metrics import cohen_kappa_score as _sk_kappa  # type: ignore[import-not-found]
except Exception:  # noqa: BLE001 - any import problem means "not available"
    _sk_kappa = None

KAPPA_METHOD = ("sklearn.metrics.cohen_kappa_score" if _sk_kappa is not None else
                "computed here from the confusion matrix (scikit-learn is not installed; scipy has no Cohen's kappa)")

NONE_LABEL = "NONE"


class JudgeAgreementError(BenchauditError):
    """The runs cannot be compared as asked; the message says why."""


# --------------------------------------------------------------------------- labels


def _judge(rec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    judge = rec.get("judge")
    return judge if isinstance(judge, Mapping) else None


def _answer_label(value: Any, rec: Mapping[str, Any]) -> str:
    """An extracted answer as a label: None/blank/"NONE" -> "NONE", else normalised."""
    if value is None or not str(value).strip() or str(value).strip().upper() == NONE_LABEL:
        return NONE_LABEL
    return normalize_answer(value, rec.get("question_labels") or ())


def grading_label(rec: Mapping[str, Any]) -> str | None:
    """The judge's grading verdict, or CORRECT/INCORRECT from ``correct`` when no grading judge; None: judge failed."""
    judge = _judge(rec)
    if judge is not None and judge.get("purpose") == "grading":
        verdict = judge.get("verdict")
        return None if verdict is None else str(verdict).strip().upper()
    return "CORRECT" if rec.get("correct") else "INCORRECT"


def extraction_label(rec: Mapping[str, Any]) -> str:
    """The record's prediction as a label (None -> "NONE")."""
    return _answer_label(rec.get("prediction"), rec)


def _regex_info(rec: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(regex label, judge extraction label or None if the judge failed), when the record carries both."""
    judge = _judge(rec)
    if judge is None or judge.get("purpose") != "extraction" or "regex_prediction" not in rec:
        return None
    verdict = judge.get("verdict")
    return _answer_label(rec["regex_prediction"], rec), None if verdict is None else _answer_label(verdict, rec)


# --------------------------------------------------------------------------- kappa


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> dict[str, Any]:
    """Observed agreement, chance agreement and Cohen's kappa of two label sequences."""
    if len(a) != len(b):
        raise ValueError("label sequences differ in length")
    n = len(a)
    if n == 0:
        return {"n": 0, "agreement": None, "expected_agreement": None, "kappa": None}
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if p_e >= 1.0:
        kappa = None  # both sides constant and equal: undefined
    elif _sk_kappa is not None:
        kappa = float(_sk_kappa(list(a), list(b)))
    else:
        kappa = (p_o - p_e) / (1 - p_e)
    return {"n": n, "agreement": p_o, "expected_agreement": p_e, "kappa": kappa}


# --------------------------------------------------------------------------- pairing


def _key(rec: Mapping[str, Any]) -> tuple[str, str, str, str, str]:
    return (str(rec["benchmark"]), str(rec["task"]), str(rec["question_id"]), str(rec["model"]),
            str(rec.get("variant") or ""))


def _index(records: Iterable[Mapping[str, Any]], name: str, pipeline: str | None) -> dict[tuple, Mapping[str, Any]]:
    out: dict[tuple, Mapping[str, Any]] = {}
    for rec in records:
        if pipeline is not None and rec.get("pipeline") != pipeline:
            continue
        key = _key(rec)
        if key in out:
            raise JudgeAgreementError(
                f"{name}: more than one record for {key[0]}.{key[1]} question {key[2]} of {key[3]}"
                f"{' variant ' + key[4] if key[4] else ''} (several pipelines?); choose one with --pipeline")
        out[key] = rec
    return out


def _purposes(records: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str(j.get("purpose")) for j in map(_judge, records) if j is not None}


def _source(records: Sequence[Mapping[str, Any]]) -> str:
    models = sorted({str(j.get("model")) for j in map(_judge, records) if j is not None})
    versions = sorted({str(j.get("prompt_version")) for j in map(_judge, records) if j is not None})
    if not models:
        return "pipeline (no judge)"
    return f"judge {', '.join(models)} (prompt {', '.join(versions)})"


def pair_runs(records_a: Sequence[Mapping[str, Any]], records_b: Sequence[Mapping[str, Any]],
              purpose: str = "auto", pipeline: str | None = None,
              names: tuple[str, str] = ("A", "B")) -> dict[str, Any]:
    """Mode (a): pair two runs' records and label each side; returns the pairs and what was left out."""
    ia, ib = _index(records_a, names[0], pipeline), _index(records_b, names[1], pipeline)
    if purpose == "auto":
        found = _purposes(ia.values()) | _purposes(ib.values())
        if len(found) > 1:
            raise JudgeAgreementError(f"the runs hold judge records of several purposes ({', '.join(sorted(found))}); "
                                      f"choose one with --purpose")
        purpose = "grading" if found == {"grading"} else "extraction"
    label = grading_label if purpose == "grading" else extraction_label
    pairs, failed = [], 0
    for key in sorted(set(ia) & set(ib)):
        ra, rb = ia[key], ib[key]
        la, lb = label(ra), label(rb)
        if la is None or lb is None:
            failed += 1
            continue
        regex = _regex_info(ra) or _regex_info(rb)
        pairs.append({"key": key, "a": la, "b": lb, "rec_a": ra, "rec_b": rb, "regex": regex})
    return {"mode": "two_runs", "purpose": purpose, "pairs": pairs, "n_judge_failed": failed,
            "n_only_a": len(set(ia) - set(ib)), "n_only_b": len(set(ib) - set(ia)),
            "a": {"name": names[0], "source": _source(list(ia.values()))},
            "b": {"name": names[1], "source": _source(list(ib.values()))}}


def within_run(records: Sequence[Mapping[str, Any]], pipeline: str | None = None, name: str = "RUN") -> dict[str, Any]:
    """Mode (b): regex extraction (A) vs judge extraction (B) within one run."""
    index = _index(records, name, pipeline)
    pairs, failed, considered = [], 0, 0
    for key in sorted(index):
        rec = index[key]
        info = _regex_info(rec)
        if info is None:
            continue
        considered += 1
        regex, judged = info
        if judged is None:
            failed += 1
            continue
        pairs.append({"key": key, "a": regex, "b": judged, "rec_a": rec, "rec_b": rec, "regex": info})
    if not considered:
        raise JudgeAgreementError(f"{name}: no record carries judge extraction (judge.purpose 'extraction') together "
                                  f"with regex_prediction; give two runs to compare instead")
    return {"mode": "within_run", "purpose": "extraction", "pairs": pairs, "n_judge_failed": failed,
            "n_only_a": 0, "n_only_b": 0, "n_without_judge_extraction": len(index) - considered,
            "a": {"name": "regex", "source": "the pipeline's regex rule (regex_prediction)"},
            "b": {"name": "judge", "source": _source([index[k] for k in index if _regex_info(index[k])])}}


# --------------------------------------------------------------------------- report


def _side_score(pairing: dict[str, Any], pair: dict[str, Any], side: str) -> float:
    """One item's score under a side: grading -> CORRECT; two runs -> the record's score; within -> exact vs gold."""
    if pairing["purpose"] == "grading":
        return 1.0 if pair[side] == "CORRECT" else 0.0
    rec = pair["rec_" + side]
    if pairing["mode"] == "two_runs":
        return float(rec.get("score", 0.0))
    gold = normalize_answer(rec.get("gold", ""), rec.get("question_labels") or ())
    return 1.0 if pair[side] == gold else 0.0


def _stratum(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(pairs)
    agree = sum(p["a"] == p["b"] for p in pairs)
    return {"n": n, "n_agree": agree, "agreement": agree / n if n else None}


def agreement_report(pairing: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of ``judge-agreement`` from :func:`pair_runs` or :func:`within_run`."""
    pairs = pairing["pairs"]
    a = [p["a"] for p in pairs]
    b = [p["b"] for p in pairs]
    k = cohen_kappa(a, b)
    counts = Counter(zip(a, b))
    totals = Counter(a) + Counter(b)
    labels = sorted(totals, key=lambda lab: (-totals[lab], lab))
    per_model = []
    by_model: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in pairs:
        by_model[p["key"][3]].append(p)
        by_task[f"{p['key'][0]}.{p['key'][1]}"].append(p)
    for model, ps in sorted(by_model.items()):
        sa = sum(_side_score(pairing, p, "a") for p in ps) / len(ps)
        sb = sum(_side_score(pairing, p, "b") for p in ps) / len(ps)
        per_model.append({"model": model, "n": len(ps), "score_a": sa, "score_b": sb, "diff_pp": 100 * (sb - sa)})
    per_task = []
    for task, ps in sorted(by_task.items()):
        kt = cohen_kappa([p["a"] for p in ps], [p["b"] for p in ps])
        per_task.append({"task": task, **kt})
    with_regex = [p for p in pairs if p["regex"] is not None]
    strata: dict[str, Any] | None = None
    if with_regex:
        strata = {
            "with_regex_and_judge_extraction": _stratum(with_regex),
            "regex_found_nothing": _stratum([p for p in with_regex if p["regex"][0] == NONE_LABEL]),
            "regex_found_an_answer": _stratum([p for p in with_regex if p["regex"][0] != NONE_LABEL]),
            "regex_and_judge_disagree": _stratum([p for p in with_regex
                                                  if p["regex"][1] is not None and p["regex"][0] != p["regex"][1]]),
        }
    score_basis = ("share of CORRECT labels" if pairing["purpose"] == "grading" else
                   "mean of each run's record score" if pairing["mode"] == "two_runs" else
                   "exact match of the extracted answer with the gold (normalised; the task metric is not re-applied)")
    return {
        "mode": pairing["mode"], "purpose": pairing["purpose"], "a": pairing["a"], "b": pairing["b"],
        "n_paired": k["n"], "n_only_a": pairing["n_only_a"], "n_only_b": pairing["n_only_b"],
        "n_judge_failed": pairing["n_judge_failed"],
        **({"n_without_judge_extraction": pairing["n_without_judge_extraction"]}
           if "n_without_judge_extraction" in pairing else {}),
        "agreement": k["agreement"], "expected_agreement": k["expected_agreement"], "kappa": k["kappa"],
        "kappa_method": KAPPA_METHOD, "labels": labels,
        "confusion": [{"a": la, "b": lb, "n": n} for (la, lb), n in sorted(counts.items())],
        "per_model": per_model, "score_basis": score_basis, "per_task": per_task, "strata": strata,
    }


def _f(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def render(doc: dict[str, Any], max_labels: int = 12) -> str:
    from tabulate import tabulate

    out = [f"judge-agreement ({doc['mode'].replace('_', ' ')}, {doc['purpose']})",
           f"  A = {doc['a']['name']}: {doc['a']['source']}",
           f"  B = {doc['b']['name']}: {doc['b']['source']}",
           f"  paired items: {doc['n_paired']}   only in A: {doc['n_only_a']}   only in B: {doc['n_only_b']}   "
           f"left out, judge output unparsed: {doc['n_judge_failed']}",
           f"  raw agreement: {_f(doc['agreement'])}   chance agreement: {_f(doc['expected_agreement'])}   "
           f"Cohen's kappa: {_f(doc['kappa'])}",
           f"  kappa: {doc['kappa_method']}", ""]
    shown = doc["labels"][:max_labels]
    other = "(other)" if len(doc["labels"]) > max_labels else None
    cols = shown + ([other] if other else [])
    grid = {(ra, cb): 0 for ra in cols for cb in cols}
    for cell in doc["confusion"]:
        ra = cell["a"] if cell["a"] in shown else other
        cb = cell["b"] if cell["b"] in shown else other
        grid[(ra, cb)] += cell["n"]
    rows = [[f"A={ra}"] + [grid[(ra, cb)] for cb in cols] for ra in cols]
    if rows:
        out += ["confusion (rows A, columns B)" + (f"; the {max_labels} most frequent labels, the rest as (other)"
                                                    if other else ""),
                tabulate(rows, headers=[""] + [f"B={cb}" for cb in cols]), ""]
    if doc["per_model"]:
        out += [f"per-model score (basis: {doc['score_basis']})",
                tabulate([[m["model"], m["n"], f"{100 * m['score_a']:.1f}", f"{100 * m['score_b']:.1f}",
                           f"{m['diff_pp']:+.1f}"] for m in doc["per_model"]],
                         headers=["model", "n", "A %", "B %", "B - A (pp)"], disable_numparse=True), ""]
    if len(doc["per_task"]) > 1:
        out += [tabulate([[t["task"], t["n"], _f(t["agreement"]), _f(t["kappa"])] for t in doc["per_task"]],
                         headers=["task", "n", "agreement", "kappa"]), ""]
    if doc["strata"]:
        names = {"with_regex_and_judge_extraction": "items with regex + judge extraction data",
                 "regex_found_nothing": "regex found nothing",
                 "regex_found_an_answer": "regex found an answer",
                 "regex_and_judge_disagree": "regex and judge disagree"}
        out += ["strata (agreement of A and B within each" +
                ("; within one run A is the regex and B the judge, so 'disagree' agrees 0 by definition"
                 if doc["mode"] == "within_run" else "") + ")",
                tabulate([[names[k], v["n"], v["n_agree"], _f(v["agreement"])] for k, v in doc["strata"].items()],
                         headers=["stratum", "n", "agree", "agreement"], disable_numparse=True)]
    return "\n".join(out).rstrip()


def add_judge_agreement_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``judge-agreement`` to the ``benchaudit`` sub-commands; returns its parser."""
    p = subparsers.add_parser(
        "judge-agreement", help="agreement of two judges, or judge vs regex (raw agreement, Cohen's kappa, confusion)",
        description="RUN_A RUN_B: pair records by (benchmark, task, question_id, model, variant) and compare the "
                    "grading verdicts (or `correct` for a run without a judge) or the extracted predictions. RUN: "
                    "within one run with judge extraction, the judge's answer vs regex_prediction. Prints raw "
                    "agreement, Cohen's kappa, a confusion table, per-model score differences (pp) and strata "
                    "(regex found nothing; regex and judge disagree).")
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="one run directory, or two (A then B)")
    p.add_argument("--purpose", choices=["auto", "extraction", "grading"], default="auto",
                   help="what to compare for two runs (default: grading if the records carry grading judges, "
                        "else extraction)")
    p.add_argument("--pipeline", default=None, metavar="P", help="only records under pipeline P")
    p.add_argument("--max-labels", type=int, default=12, metavar="N",
                   help="labels shown in the confusion table; the rest are pooled as (other) (default 12)")
    p.add_argument("--json", action="store_true", help="print the result as JSON instead of tables")
    return p


def _load(path: Path) -> list[dict[str, Any]]:
    _meta, records = load_run(path, warn=lambda msg: print(f"warning: {msg}", file=sys.stderr), require_records=True)
    return records


def run_judge_agreement(args: argparse.Namespace) -> int:
    """Run ``benchaudit judge-agreement``: 0 when a comparison was printed, 2 on bad input."""
    try:
        if len(args.runs) not in (1, 2):
            raise JudgeAgreementError(f"give one run directory or two, not {len(args.runs)}")
        if len(args.runs) == 2:
            if args.runs[0].resolve() == args.runs[1].resolve():
                raise JudgeAgreementError("RUN_A and RUN_B are the same directory")
            pairing = pair_runs(_load(args.runs[0]), _load(args.runs[1]), purpose=args.purpose,
                                pipeline=args.pipeline, names=(args.runs[0].name, args.runs[1].name))
        else:
            if args.purpose == "grading":
                raise JudgeAgreementError("within one run only extraction (judge vs regex_prediction) is compared")
            pairing = within_run(_load(args.runs[0]), pipeline=args.pipeline, name=str(args.runs[0]))
        if not pairing["pairs"]:
            raise JudgeAgreementError("no paired items to compare (no common (benchmark, task, question_id, model, "
                                      "variant) with a usable label on both sides)")
        doc = agreement_report(pairing)
    except (OfflineError, JudgeAgreementError) as err:
        print(f"benchaudit judge-agreement: {err}", file=sys.stderr)
        return 2
    except BenchauditError as err:  # a run directory that is missing, corrupt or empty
        print(f"benchaudit judge-agreement: {err}", file=sys.stderr)
        return cli_exit_code(err)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(render(doc, max_labels=max(1, args.max_labels)))
    return 0
