"""The `openai:URL` judge: ConceptGuard's rubric (metrics/judges.py) sent to
any OpenAI-compatible chat-completions server (vLLM, llama.cpp server, ...)
at URL (e.g. http://127.0.0.1:8000/v1); `judge_model` names the model and
OPENAI_API_KEY is sent when set (never in clear text to another host:
openai_api.py). Failed requests (timeout, connection error, HTTP 5xx) are
retried a bounded number of times with backoff, then reported as errors.
The session hands it to metric code (`References.connect_judge`)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from unlearnbench.metrics.judges import Judgement, JudgeRequest, parsed_judgement, rubric_prompt
from unlearnbench.openai_api import EndpointError, OpenAIClient


class OpenAIJudge:
    def __init__(
        self,
        url: str,
        model: str = "",
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        workers: int = 8,
    ):
        self.url = url.rstrip("/")
        self.endpoint = self.url if self.url.endswith("/chat/completions") else self.url + "/chat/completions"
        self.model, self.workers = model, workers
        self.identity = f"openai:{self.endpoint}:{model}"
        # A rubric score is a few bytes: a reply of a MiB is not a judge's.
        self.client = OpenAIClient(
            self.endpoint,
            what=f"--judge openai:{url}",
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_reply_bytes=1 << 20,
        )

    def _post(self, prompt: str) -> Judgement:
        body = {
            "model": self.model or "default",
            "temperature": 0,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": prompt}],
        }
        try:
            payload = self.client.post("", body)
        except EndpointError as exc:
            return Judgement(None, "", str(exc))
        try:
            raw = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return Judgement(None, json.dumps(payload)[:200], "malformed response (no choices[0].message)")
        return parsed_judgement(str(raw))

    def judge(self, requests: list[JudgeRequest]) -> list[Judgement]:
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(self._post, [rubric_prompt(r) for r in requests]))
