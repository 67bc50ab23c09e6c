"""Time the embedded model: install check, server start, judge-like calls over one long note.

Usage::

    python bench/local_model.py [--model qwen2.5-coder-0.5b] [--flash-attn] [--calls 4]

Prints one JSON object. Each call asks for a JSON verdict on a different criterion of the same
synthetic ~3,000-token note, in sequence, so calls after the first reuse the cached prefix.
Numbers depend on the CPU and on whatever else runs on it; compare runs on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import time

from openai import OpenAI

from evolve.local import DEFAULT_LOCAL_MODEL, LocalServer, install

CRITERIA = ("completeness", "accuracy", "conciseness", "follow-up plan", "medication safety")

SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
        "rationale": {"type": "string", "maxLength": 300},
    },
    "required": ["score", "rationale"],
    "additionalProperties": False,
}


def synthetic_note(days: int = 40) -> str:
    """A made-up hospital course, one paragraph per day (roughly 75 tokens each)."""
    lines = ["Discharge summary. Patient: 71-year-old woman with heart failure and diabetes."]
    for day in range(1, days + 1):
        lines.append(
            f"Day {day}: blood pressure {110 + day % 17}/{65 + day % 9} mmHg, heart rate "
            f"{70 + day % 13} bpm, weight {68.0 - day * 0.1:.1f} kg. Furosemide "
            f"{40 if day < 20 else 20} mg daily; insulin glargine {14 + day % 3} units at night. "
            f"Creatinine {0.9 + (day % 5) * 0.05:.2f} mg/dL, potassium {3.8 + (day % 4) * 0.1:.1f} "
            f"mmol/L. Walked {day * 10} metres with physiotherapy; no chest pain overnight."
        )
    lines.append("Plan: cardiology clinic in 2 weeks, daily weights, repeat electrolytes in 1 week.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL)
    parser.add_argument("--flash-attn", action="store_true")
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()

    result: dict[str, object] = {"model": args.model, "flash_attn": args.flash_attn}
    t0 = time.monotonic()
    install(model=args.model, log=lambda _: None)
    result["install_check_s"] = round(time.monotonic() - t0, 2)

    note = synthetic_note()
    calls = []
    with LocalServer(args.model, flash_attn=args.flash_attn) as srv:
        result["startup_s"] = round(srv.startup_seconds or 0.0, 2)
        client = OpenAI(base_url=srv.base_url, api_key="local", timeout=600, max_retries=0)
        for i in range(args.calls):
            criterion = CRITERIA[i % len(CRITERIA)]
            t = time.monotonic()
            resp = client.chat.completions.create(
                model=args.model,
                messages=[
                    {"role": "system", "content": f"Clinical note:\n{note}"},
                    {
                        "role": "user",
                        "content": f"Rate the note's {criterion} from 1 to 5 with a short "
                        "rationale. Answer in JSON.",
                    },
                ],
                temperature=0,
                top_p=1,
                seed=1,
                max_tokens=args.max_tokens,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True},
                },
            )
            choice = resp.choices[0]
            try:
                json.loads(choice.message.content or "")
                valid = choice.finish_reason == "stop"
            except json.JSONDecodeError:
                valid = False
            usage = resp.usage
            details = usage.prompt_tokens_details if usage else None
            calls.append(
                {
                    "criterion": criterion,
                    "seconds": round(time.monotonic() - t, 2),
                    "prompt_tokens": usage.prompt_tokens if usage else None,
                    "cached_tokens": details.cached_tokens if details else None,
                    "completion_tokens": usage.completion_tokens if usage else None,
                    "finish_reason": choice.finish_reason,
                    "valid_json": valid,
                }
            )
    result["calls"] = calls
    if len(calls) > 1:
        warm = sorted(c["seconds"] for c in calls[1:])[len(calls[1:]) // 2]
        # the ratio the prompt order exists for: first (cold) call vs the median cached-prefix call
        result["cold_over_cached_prefix_ratio"] = round(calls[0]["seconds"] / max(warm, 1e-9), 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
