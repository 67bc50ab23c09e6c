"""The real embedded server: start it, make one judge-like JSON-schema call, stop it.

Checks validity (schema, usage, clean shutdown), never exact text or scores: the same seed can
give different text with a cold or a warm prompt cache.
"""

from __future__ import annotations

import json
import os
import time

import pytest
from openai import OpenAI

from evolve.local import LocalServer

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
        "rationale": {"type": "string", "maxLength": 100},
    },
    "required": ["score", "rationale"],
    "additionalProperties": False,
}

NOTE = (
    "Discharge summary. 67-year-old man admitted with community-acquired pneumonia. Treated "
    "with ceftriaxone and azithromycin for 5 days; afebrile for 48 hours before discharge. "
    "Follow-up chest X-ray in 6 weeks. Allergies: none known."
)


def test_real_server_answers_json_schema_and_stops(installed_local_model: object) -> None:
    srv = LocalServer(startup_timeout=300)
    with srv:
        assert srv.startup_seconds is not None
        pid = srv.pid
        assert pid is not None and srv.running
        client = OpenAI(base_url=srv.base_url, api_key="local", timeout=300, max_retries=0)
        t0 = time.monotonic()
        resp = client.chat.completions.create(
            model="local",
            messages=[
                {
                    "role": "system",
                    "content": "You grade clinical notes for completeness. Reply in JSON.",
                },
                {
                    "role": "user",
                    "content": f"Note:\n{NOTE}\n\nScore completeness from 1 (poor) to 5 "
                    "(excellent) and give a one-sentence rationale.",
                },
            ],
            temperature=0,
            top_p=1,
            seed=1,
            max_tokens=64,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": SCHEMA, "strict": True},
            },
        )
        call_seconds = time.monotonic() - t0
        print(
            f"\n[local model] startup {srv.startup_seconds:.1f} s, one call {call_seconds:.1f} s, "
            f"usage {resp.usage}"
        )
        choice = resp.choices[0]
        assert choice.finish_reason == "stop", choice.finish_reason
        data = json.loads(choice.message.content or "")
        assert set(data) == {"score", "rationale"}
        assert isinstance(data["score"], int) and 1 <= data["score"] <= 5
        assert isinstance(data["rationale"], str) and len(data["rationale"]) <= 100
        assert resp.usage is not None
        assert resp.usage.prompt_tokens > 0 and resp.usage.completion_tokens > 0
        assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert not srv.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
