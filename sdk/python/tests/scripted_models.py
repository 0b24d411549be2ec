"""Models for the adapters' tests that answer from a script instead of
calling a provider: the frameworks run their real agent loops around them
(tool planning, approvals, middleware), with no model key."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Sequence, Tuple

# One turn of a script: tool calls (name, arguments, call id), or a final
# text answer.
Turn = Sequence[Tuple[str, Dict[str, Any], str]]


def openai_model(script: List[Any]) -> Any:
    """An agents.Model answering each request with the next turn: a list of
    tool calls, or a str (the final output). Once the script is spent, it
    answers "done"."""
    from agents import Model, ModelResponse, Usage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(Model):
        def __init__(self) -> None:
            self.turns = list(script)
            self.inputs: List[Any] = []  # what the framework sent each turn

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            self.inputs.append(input)
            turn = self.turns.pop(0) if self.turns else "done"
            if isinstance(turn, str):
                out: List[Any] = [ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text=turn, annotations=[])])]
            else:
                out = [ResponseFunctionToolCall(type="function_call", id=f"fc_{cid}", call_id=cid, name=name,
                                                arguments=json.dumps(args), status="completed")
                       for name, args, cid in turn]
            return ModelResponse(output=out, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the tests do not stream")

    return Scripted()


def langchain_model(script: List[Any]) -> Any:
    """A LangChain chat model (the framework's GenericFakeChatModel, taught
    to accept tools) answering each turn from the script: a list of tool
    calls, or a str."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    messages = []
    for turn in script:
        if isinstance(turn, str):
            messages.append(AIMessage(content=turn))
        else:
            messages.append(AIMessage(content="", tool_calls=[
                {"name": name, "args": args, "id": cid, "type": "tool_call"} for name, args, cid in turn]))

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return Scripted(messages=iter(messages))
