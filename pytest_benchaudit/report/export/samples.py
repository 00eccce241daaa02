"""Every Eval Ever per-sample lines (``instance_level_eval.schema.json``) from our records.

Question content is withheld unless asked for; gold and model outputs are written.
"""

from __future__ import annotations

import hashlib

from pydantic import JsonValue

from pytest_benchaudit.pipeline.record_documents import PipelineCard, RecordRow
from pytest_benchaudit.report.export.export_documents import (
    AnswerAttribution,
    Performance,
    SampleInput,
    SampleLine,
    SampleOutput,
    TokenUsage,
)
from pytest_benchaudit.report.export.fields import (
    SCHEMA_VERSION,
    _evaluation_name,
    _str_map,
)

# ------------------------------------------------------------------ samples


def _question_text(request: dict[str, JsonValue]) -> tuple[str, str]:
    """(the question as the model was asked it: last user turn or the prompt; the whole request as text)."""
    messages = request.get("messages") or []
    if messages and isinstance(messages, list):
        turns = [m for m in messages if isinstance(m, dict)]
        users = [m.get("content") or "" for m in turns if m.get("role") == "user"]
        formatted = "\n\n".join(f"[{m.get('role')}]\n{m.get('content') or ''}" for m in turns)
        return (str(users[-1]) if users else ""), formatted
    prompt = request.get("prompt") or ""
    return str(prompt), str(prompt)


def sample_line(
    rec: RecordRow, evaluation_id: str, model_id: str, card: PipelineCard, include_questions: bool
) -> SampleLine:
    request = rec.get("request") or {}
    raw_question, formatted = _question_text(request)
    gold = str(rec.get("gold", ""))
    inp: SampleInput = {"raw": "", "reference": [gold]}
    if include_questions:
        inp["raw"] = raw_question
        inp["formatted"] = formatted
        inp["choices"] = list(rec.get("question_labels") or []) or None
    outputs = [str(o) for o in rec.get("earlier_outputs") or []] + [str(rec.get("raw_output") or "")]
    reasoning_text = rec.get("reasoning")
    output: SampleOutput = {"raw": outputs, "reasoning_trace": [reasoning_text] if reasoning_text else None}
    rule = card.get("fields", {}).get("extraction.rule") or "unspecified"
    reasoning = card.get("fields", {}).get("extraction.reasoning")
    attribution: list[AnswerAttribution] = [
        {
            "turn_idx": 0,
            "source": f"output.raw[{len(outputs) - 1}]",
            "extracted_value": "" if rec.get("prediction") is None else str(rec["prediction"]),
            "extraction_method": f"benchaudit:{rule}" + (f" (reasoning={reasoning})" if reasoning else ""),
            "is_terminal": True,
        }
    ]
    usage = rec.get("usage") or {}
    token_usage: TokenUsage | None = None
    prompt_tokens, completion_tokens, total_tokens = (
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        usage.get("total_tokens"),
    )
    if isinstance(prompt_tokens, int) and isinstance(completion_tokens, int):
        token_usage = {
            "input_tokens": prompt_tokens,
            "output_tokens": completion_tokens,
            "total_tokens": total_tokens if isinstance(total_tokens, int) else prompt_tokens + completion_tokens,
        }
        details = usage.get("completion_tokens_details") or {}
        reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if isinstance(reasoning_tokens, int):
            token_usage["reasoning_tokens"] = reasoning_tokens
    latency = rec.get("latency_s")
    performance: Performance = {
        "latency_ms": round(float(latency) * 1000, 3) if isinstance(latency, (int, float)) and latency > 0 else None,
        "additional_details": _str_map({"attempts": rec.get("attempts"), "asks": rec.get("asks")}),
    }
    meta: dict[str, object] = {
        "benchmark": rec.get("benchmark"),
        "task": rec.get("task"),
        "variant": rec.get("variant") or None,
        "question_index": rec.get("question_index"),
        "repeat": rec.get("repeat"),  # a question asked K times is K samples of one sample_id: which one this is
        "pipeline": rec.get("pipeline"),
        "pipeline_hash": rec.get("pipeline_hash"),
        "valid": rec.get("valid"),
        "invalid_reason": rec.get("invalid_reason"),
        "invalid_stage": rec.get("invalid_stage"),
        "finish_reason": rec.get("finish_reason"),
        "extraction_detail": rec.get("extraction_detail") or None,
        "score_extras": rec.get("score_extras") or None,
        "top_logprobs": rec.get("top_logprobs") or None,
        "served_model": rec.get("served_model"),
        "question_withheld": not include_questions,
    }
    if include_questions and rec.get("question_meta"):
        meta["question_meta"] = rec["question_meta"]
    for key, value in rec.items():  # an import's own values (released_prediction, released_score, ...)
        if key.startswith("released_") or key == "source_row":
            meta[key] = value
    hashed = raw_question + "\x1f" + gold  # over the question as asked, whether or not it is exported
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model_id,
        "evaluation_name": _evaluation_name(rec["benchmark"], rec["task"], rec.get("variant", "")),
        "evaluation_result_id": _evaluation_name(rec["benchmark"], rec["task"], rec.get("variant", "")),
        "sample_id": str(rec.get("question_id")),
        "sample_hash": hashlib.sha256(hashed.encode("utf-8")).hexdigest(),
        "interaction_type": "single_turn",
        "input": inp,
        "output": output,
        "messages": None,
        "answer_attribution": attribution,
        "evaluation": {"score": float(rec.get("score", 0.0)), "is_correct": bool(rec.get("correct")), "num_turns": 1},
        "token_usage": token_usage,
        "performance": performance,
        "error": rec.get("error"),
        "metadata": _str_map(meta),
    }
