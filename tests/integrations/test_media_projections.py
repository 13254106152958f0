"""Each adapter carries a read's images in its provider's own form, checked through the
framework's own runner with a scripted model that asserts it received the image."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from typing import Any

import jsonschema
import pytest
from PIL import Image

import toolfs
from tests.media_samples import image_bytes, text_pdf

PICTURE = image_bytes("RGB", (2400, 1200), "JPEG")  # shown at 1568x784
SCAN = text_pdf(["typed text", None])


def _workspace(root: str) -> toolfs.Workspace:
    ws = toolfs.Workspace("memory://", root=f"/{root}")
    ws.fs.fs.pipe(f"/{root}/pic.jpg", PICTURE)
    ws.fs.fs.pipe(f"/{root}/scan.pdf", SCAN)
    return ws


def _size_of(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size  # type: ignore[no-any-return]


def _from_data_url(url: str) -> tuple[str, bytes]:
    head, _, data = url.partition(",")
    assert head.startswith("data:") and head.endswith(";base64")
    return head[5:-7], base64.b64decode(data)


# -- MCP ----------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_mcp_read_returns_image_content_next_to_the_text() -> None:
    from mcp import Client

    from toolfs.integrations.mcp_server import ToolfsMCP, output_schema

    async with Client(ToolfsMCP(_workspace("mcp")).server) as client:
        pic = await client.call_tool("read", {"file_path": "pic.jpg"})
        scan = await client.call_tool("read", {"file_path": "scan.pdf"})
        text = await client.call_tool("read", {"file_path": "missing.txt"})
    assert [c.type for c in pic.content] == ["text", "image"]
    assert pic.content[0].text.startswith("Image pic.jpg (JPEG, 2400x1200,")
    assert pic.content[1].mime_type == "image/jpeg"
    assert _size_of(base64.b64decode(pic.content[1].data)) == (1568, 784)
    assert [c.type for c in scan.content] == ["text", "image"]
    assert "--- page 1 of 2 ---\ntyped text" in scan.content[0].text
    assert [c.type for c in text.content] == ["text"]
    for result in (pic, scan, text):  # what clients check against the announced schema
        jsonschema.validate(result.structured_content, output_schema("read"))
    assert pic.structured_content["result"]["image"] == {
        "mime_type": "image/jpeg", "width": 1568, "height": 784}


@pytest.mark.anyio
async def test_mcp_stdio_server_sends_the_image(tmp_path: Any) -> None:
    """The same over stdio, through ``toolfs serve DIR`` in its own process."""
    from mcp import Client

    from tests.integrations.test_mcp import _stdio

    (tmp_path / "pic.jpg").write_bytes(PICTURE)
    async with Client(_stdio(str(tmp_path))) as client:
        pic = await client.call_tool("read", {"file_path": "pic.jpg"})
    assert [c.type for c in pic.content] == ["text", "image"]
    assert _size_of(base64.b64decode(pic.content[1].data)) == (1568, 784)


# -- Anthropic ----------------------------------------------------------------------


def test_anthropic_tool_runner_sends_image_blocks() -> None:
    from tests.integrations.test_anthropic_text_editor import ScriptedModel, steps
    from toolfs.integrations.anthropic import beta_tools

    model = ScriptedModel(steps([("read", {"file_path": "pic.jpg"}),
                                 ("read", {"file_path": "scan.pdf"})]))
    model.run(beta_tools(_workspace("anthropic")))
    pic, scan = model.results[0]
    assert not pic.get("is_error") and not scan.get("is_error")
    assert [b["type"] for b in pic["content"]] == ["text", "image"]
    source = pic["content"][1]["source"]
    assert source["type"] == "base64" and source["media_type"] == "image/jpeg"
    assert _size_of(base64.b64decode(source["data"])) == (1568, 784)
    assert [b["type"] for b in scan["content"]] == ["text", "image"]


# -- OpenAI: the Agents SDK and the Responses API -----------------------------------


def test_agents_sdk_sends_tool_output_images() -> None:
    from agents import Agent, RunConfig, Runner
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call
    from agents.usage import Usage

    from toolfs.integrations.openai_agents import function_tools

    class Scripted(Model):
        def __init__(self) -> None:
            self.sent: list[Any] = []

        async def get_response(self, system_instructions: str | None, input: Any,
                               *args: Any, **kwargs: Any) -> ModelResponse:
            outputs = [i for i in input if isinstance(i, dict)
                       and i.get("type") == "function_call_output"]
            if not outputs:
                calls = [function_call("read", {"file_path": "pic.jpg", "offset": None,
                                                "limit": None}, call_id="c1")]
                return ModelResponse(output=calls, usage=Usage(), response_id=None)
            self.sent = outputs
            return ModelResponse(output=[assistant_message("seen")], usage=Usage(),
                                 response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    model = Scripted()
    agent = Agent(name="viewer", model=model, tools=function_tools(_workspace("agents")))
    asyncio.run(Runner.run(agent, "look", run_config=RunConfig(tracing_disabled=True)))
    (item,) = model.sent
    kinds = [part["type"] for part in item["output"]]
    assert kinds == ["input_text", "input_image"]
    assert item["output"][0]["text"].startswith("Image pic.jpg (JPEG,")
    mime, data = _from_data_url(item["output"][1]["image_url"])
    assert mime == "image/jpeg" and _size_of(data) == (1568, 784)


def test_responses_api_function_call_output_has_input_image() -> None:
    import httpx2
    import openai

    from toolfs.integrations.openai import handle_function_call

    ws = _workspace("responses")
    requests: list[dict[str, Any]] = []

    def handler(request: Any) -> Any:
        body = json.loads(request.content)
        requests.append(body)
        if len(requests) == 1:
            output = [{"type": "function_call", "id": "fc_1", "call_id": "call_1",
                       "name": "read", "arguments": json.dumps({"file_path": "scan.pdf"}),
                       "status": "completed"}]
        else:
            output = [{"type": "message", "id": "msg_2", "role": "assistant",
                       "status": "completed",
                       "content": [{"type": "output_text", "text": "seen",
                                    "annotations": []}]}]
        return httpx2.Response(200, json={
            "id": f"resp_{len(requests)}", "object": "response", "created_at": 0,
            "model": "scripted", "status": "completed", "output": output,
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "error": None, "incomplete_details": None, "instructions": None,
            "metadata": {}, "temperature": 1, "top_p": 1})

    client = openai.OpenAI(api_key="test", max_retries=0,
                           http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))
    items: list[Any] = [{"role": "user", "content": "Read scan.pdf."}]
    tools = ws.tool_definitions("openai_responses", ["read"])
    while True:
        response = client.responses.create(model="scripted", input=items, tools=tools)
        items += [i.model_dump(exclude_none=True) for i in response.output]
        calls = [i for i in response.output if i.type == "function_call"]
        if not calls:
            break
        items += [handle_function_call(ws, call) for call in calls]
    sent = [i for i in requests[-1]["input"] if i.get("type") == "function_call_output"]
    assert [part["type"] for part in sent[0]["output"]] == ["input_text", "input_image"]
    assert "--- page 2 of 2 ---\n[No text layer" in sent[0]["output"][0]["text"]
    mime, data = _from_data_url(sent[0]["output"][1]["image_url"])
    assert mime == "image/jpeg" and max(_size_of(data)) <= 1568


# -- pydantic-ai --------------------------------------------------------------------


def test_pydantic_ai_agent_receives_binary_content() -> None:
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolfs.integrations.pydantic_ai import toolset

    received: list[Any] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if not any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[ToolCallPart("read", {"file_path": "pic.jpg"},
                                                     tool_call_id="r1")])
        received.extend(p for p in last.parts if isinstance(p, ToolReturnPart | UserPromptPart))
        return ModelResponse(parts=[TextPart("seen")])

    Agent(FunctionModel(respond), toolsets=[toolset(_workspace("pydantic"))]).run_sync("look")
    returned = [p for p in received if isinstance(p, ToolReturnPart)]
    assert str(returned[0].content).startswith("Image pic.jpg (JPEG, 2400x1200,")
    images = [c for p in received if isinstance(p, UserPromptPart)
              for c in (p.content if isinstance(p.content, list) else [])
              if isinstance(c, BinaryContent)]
    assert [(i.media_type, _size_of(i.data)) for i in images] == [("image/jpeg", (1568, 784))]


# -- LangChain and Deep Agents ------------------------------------------------------


def test_langchain_agent_tool_message_has_image_blocks() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

    from tests.integrations.test_langchain import ScriptedModel, call
    from toolfs.integrations.langchain import tools

    seen: list[ToolMessage] = []

    def turn(messages: list[BaseMessage]) -> AIMessage:
        if not isinstance(messages[-1], ToolMessage):
            return call("read", file_path="scan.pdf")
        seen.append(messages[-1])
        return AIMessage("done")

    agent = create_agent(ScriptedModel(turn=turn), tools=tools(_workspace("langchain")))
    agent.invoke({"messages": [{"role": "user", "content": "look"}]})
    (message,) = seen
    assert message.status == "success"
    blocks = message.content
    assert isinstance(blocks, list) and [b["type"] for b in blocks] == ["text", "image"]
    assert "--- page 1 of 2 ---\ntyped text" in blocks[0]["text"]
    assert blocks[1]["mime_type"] == "image/jpeg"
    assert max(_size_of(base64.b64decode(blocks[1]["base64"]))) <= 1568
    assert message.artifact["result"]["page_list"][1]["image"]["mime_type"] == "image/jpeg"


def test_deep_agents_read_file_returns_the_image_fitted() -> None:
    from deepagents import create_deep_agent
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

    from tests.integrations.test_langchain import ScriptedModel, call
    from toolfs.integrations.deepagents import ToolfsBackend

    ws = _workspace("deepagents")
    small = image_bytes("RGBA", (40, 30), "PNG")
    ws.fs.fs.pipe("/deepagents/small.png", small)
    seen: list[ToolMessage] = []

    def turn(messages: list[BaseMessage]) -> AIMessage:
        if isinstance(messages[-1], ToolMessage):
            seen.append(messages[-1])
        if len(seen) == 0:
            return call("read_file", file_path="/pic.jpg")
        if len(seen) == 1:
            return call("read_file", file_path="/small.png")
        return AIMessage("done")

    graph = create_deep_agent(model=ScriptedModel(turn=turn), backend=ToolfsBackend(ws))
    graph.invoke({"messages": [{"role": "user", "content": "look"}]})
    images = []
    for message in seen:
        blocks = message.content
        assert isinstance(blocks, list), blocks
        (image,) = [b for b in blocks if b.get("type") == "image"]
        images.append((image["mime_type"], base64.b64decode(image["base64"])))
    (pic_mime, pic), (small_mime, small_shown) = images
    assert pic_mime == "image/jpeg" and _size_of(pic) == (1568, 784)  # its own format
    assert small_mime == "image/png" and small_shown == small  # within the limits: as is
