#!/usr/bin/env python3
"""An editor, for the black-box tests: the Python ACP SDK's client
(`agent-client-protocol` from the Python package index), driving
`shard acp` as an editor would. Not Shard's code.

It speaks the same lines as driver.mjs (see there): JSON commands on
stdin, one JSON line per thing that happened on stdout. This SDK has no
`$/cancel_request`, so it never reports `taken_back`.
"""

import asyncio
import json
import os
import sys

import acp
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse


def say(event):
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def plain(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True) if model else None


class Editor(acp.Client):
    def __init__(self):
        self.questions = {}
        self.asked = 0

    async def session_update(self, session_id, update, **kwargs):
        say({"event": "update", "session": session_id, "update": plain(update)})

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked += 1
        question = self.asked
        params = {
            "sessionId": session_id,
            "toolCall": plain(tool_call),
            "options": [plain(option) for option in options],
        }
        say({"event": "asked", "question": question, "params": params})
        answered = asyncio.get_running_loop().create_future()
        self.questions[question] = answered
        option = await answered
        if option is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option)
        )


async def answer(to, tag, call):
    try:
        result = await call
        say({"event": "answer", "to": to, "tag": tag, "result": plain(result)})
    except acp.RequestError as error:
        say({"event": "answer", "to": to, "tag": tag,
             "error": {"code": error.code, "message": str(error), "data": error.data}})
    except Exception as error:  # the connection closed, say
        say({"event": "answer", "to": to, "tag": tag, "error": {"message": str(error)}})


async def main():
    editor = Editor()
    async with acp.stdio.spawn_agent_process(
        editor, os.environ["SHARD_BIN"], "acp", *sys.argv[1:], env=dict(os.environ)
    ) as (connection, process):
        loop = asyncio.get_running_loop()
        commands = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
        running = set()

        def start(coroutine):
            task = asyncio.create_task(coroutine)
            running.add(task)
            task.add_done_callback(running.discard)

        while line := await commands.readline():
            command = json.loads(line)
            what, tag = command["do"], command.get("tag")
            if what == "initialize":
                start(answer(what, tag, connection.initialize(protocol_version=1)))
            elif what == "new":
                start(answer(what, tag, connection.new_session(cwd=command["cwd"], mcp_servers=[])))
            elif what == "list":
                start(answer(what, tag, connection.list_sessions(cwd=command.get("cwd"))))
            elif what == "load":
                start(answer(what, tag, connection.load_session(
                    cwd=command.get("cwd", "/"), session_id=command["session"], mcp_servers=[])))
            elif what == "resume":
                start(answer(what, tag, connection.resume_session(
                    cwd=command.get("cwd", "/"), session_id=command["session"], mcp_servers=[])))
            elif what == "set_mode":
                start(answer(what, tag, connection.set_session_mode(
                    session_id=command["session"], mode_id=command["mode"])))
            elif what == "set_option":
                start(answer(what, tag, connection.set_config_option(
                    config_id=command["config"], session_id=command["session"],
                    value=command["value"])))
            elif what == "prompt":
                start(answer(what, tag, connection.prompt(
                    session_id=command["session"], prompt=[acp.text_block(command["text"])])))
            elif what == "cancel":
                start(connection.cancel(session_id=command["session"]))
            elif what == "answer":
                answered = editor.questions.pop(command["question"], None)
                if answered and not answered.done():
                    answered.set_result(command["option"])
            else:
                say({"event": "unknown", "command": command})
        process.stdin.close()
        code = await process.wait()
        say({"event": "closed", "code": code})


asyncio.run(main())
