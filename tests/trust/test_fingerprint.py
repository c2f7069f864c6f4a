"""Environment fingerprints: what the server says, secrets never kept, waits bounded."""

from __future__ import annotations

import asyncio
import json
import time

from tests.trust.conftest import json_body
from tokenmark.trust.fingerprint import (
    CpuSnapshot,
    EnvironmentWatcher,
    ServerProbe,
    background_cores,
    client_machine,
    describe_server,
)

SECRET = "sk-live-4f9c2b7e1d0a"
HEADER_SECRET = "tenant-ab12cd34ef"


async def vllm_like(path: str, headers: dict[str, str]):
    auth = headers.get("authorization", "")
    echo = {"x-echo-auth": auth, "set-cookie": f"session={SECRET}", "server": "uvicorn"}
    if path == "/v1/models":
        return 200, echo, json_body({"object": "list", "data": [
            {"id": "tiny", "owned_by": "vllm", "max_model_len": 2048, "note": auth}]})
    if path == "/version":
        return 200, {}, json_body({"version": "0.33.0"})
    if path == "/get_server_info":
        return 404, {}, b"{}"
    if path == "/info":
        return 200, {}, json_body({"api_key": SECRET, "tenant": headers.get("x-tenant"),
                                   "text": f"Bearer {SECRET}"})
    if path == "/metrics":
        return 200, {}, b"# TYPE vllm:prompt_tokens_total counter\n" \
                        b'vllm:prompt_tokens_total{model_name="tiny"} 5.0\n'
    return 404, {}, b"not found"


def test_server_description_keeps_facts_and_drops_secrets(loopback):
    async def go():
        async with loopback(vllm_like) as srv:
            probe = ServerProbe((srv.url,), f"Authorization: Bearer {SECRET}\r\n"
                                f"X-Tenant: {HEADER_SECRET}\r\n".encode(),
                                (SECRET, HEADER_SECRET))
            return await describe_server(probe)

    [desc] = asyncio.run(go())
    text = json.dumps(desc)
    assert SECRET not in text and HEADER_SECRET not in text
    assert desc["models"]["body"]["data"][0]["id"] == "tiny"
    assert desc["models"]["headers"]["server"] == "uvicorn"
    assert desc["models"]["headers"]["set-cookie"] == "(redacted)"
    assert desc["info"]["/version"]["body"] == {"version": "0.33.0"}
    assert desc["info"]["/info"]["body"]["api_key"] == "(redacted)"
    assert desc["info"]["/info"]["body"]["text"] == "Bearer ***"
    assert desc["metrics"] == {"available": True, "engines": ["vllm"], "status": 200}
    assert "vllm" in desc["engines"]


def test_a_hanging_endpoint_costs_its_deadline_not_the_run(loopback):
    async def hang(path: str, headers: dict[str, str]):
        if path == "/v1/models":
            return 200, {}, json_body({"data": [{"id": "m"}]})
        return None  # read the request, never answer

    async def go():
        async with loopback(hang) as srv:
            probe = ServerProbe((srv.url,), timeout_s=0.3, budget_s=5.0)
            t0 = time.monotonic()
            desc = await describe_server(probe)
            return desc, time.monotonic() - t0

    [desc], took = asyncio.run(go())
    assert took < 1.5  # every GET in parallel, each cut at 0.3 s
    assert desc["models"]["status"] == 200
    assert desc["info"] == {} and desc["metrics"]["available"] is False
    assert "no answer within 0.3 s" in desc["metrics"]["error"]

    async def whole_budget():
        async with loopback(hang) as srv:
            t0 = time.monotonic()
            desc = await describe_server(ServerProbe((srv.url,), timeout_s=5, budget_s=0.4))
            return desc, time.monotonic() - t0

    [desc], took = asyncio.run(whole_budget())
    assert took < 1.5 and "no description within 0.4 s" in desc["error"]


def test_client_machine_and_background_load():
    m = client_machine()
    assert m["cores_logical"] >= m["cores_available"] >= 1
    assert m["memory_bytes"] > 0 and m["python"].count(".") == 2
    assert len(m["host_sha256"]) == 16
    # 3 s of machine CPU over 2 s of wall, 1 s of it ours: the rest used 1 core
    assert background_cores(CpuSnapshot(100.0, 5.0, 10.0), CpuSnapshot(103.0, 6.0, 12.0)) == 1.0
    assert background_cores(CpuSnapshot(-1.0, 0, 0), CpuSnapshot(-1.0, 0, 1)) is None


def test_environment_watcher_records_before_and_during(tmp_path):
    w = EnvironmentWatcher(before_s=0.05)

    async def go():
        await w.start(tmp_path)
        await asyncio.sleep(0.05)
        await w.stop()

    asyncio.run(go())
    section, findings = w.finish(None, tmp_path)  # type: ignore[arg-type]
    assert findings == []
    assert section["client"]["tokenmark"]
    load = section["background_load"]
    assert load["before"] is None or load["before"] >= 0
    assert load["during"] is None or load["during"] >= 0
