"""The MCP server: the lowlevel SDK server with Deskhand's six tools, each call checked against the host's consent
first. A host never answered is asked about in the Deskhand app's window (started for it when none runs): the call
waits for the person's answer. Errors the host can fix (bad arguments, an unknown tool, a run already going, no
model set up, no consent) are JSON-RPC errors whose message says what to do; the server keeps serving after each.

Protocol: JSON-RPC 2.0 with the `initialize` handshake, up to revision 2025-11-25 (PROTOCOL_VERSION; the SDK
also negotiates the older revisions a host may ask for)."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import math
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import LATEST_HANDSHAKE_VERSION

import app
from app.agent.stop_signals import StopSignals
from app.domain.cancel import CancelToken
from app.domain.errors import DeskhandError
from app.domain.paths import Paths
from app.domain.units import steps_text
from app.link.consent import UNNAMED, host_name
from app.link.protocol import HOST_CANCELLED
from app.mcp_server import desk, in_app, tools
from app.mcp_server.consent import ConsentStore, not_allowed_message
from app.mcp_server.stdio_input import CheckedInput

log = logging.getLogger("deskhand.mcp")
PROTOCOL_VERSION = LATEST_HANDSHAKE_VERSION
NOT_ALLOWED = -32003  # an application error code: the person has not allowed this host (or this tool)
CANNOT = -32004  # the request is well formed but Deskhand cannot do it now (busy, no model, no display)
INSTRUCTIONS = ("Deskhand operates this computer's desktop with a local vision-language model, one step at a "
                "time, in its own window where the person at the desk sees each step and approves risky ones. "
                "Use run_task for a whole task. The first call asks the person whether this program may use "
                "Deskhand, and waits for their answer.")
HEADLESS_INSTRUCTIONS = ("Deskhand operates this computer's desktop with a local vision-language model, one step "
                         "at a time, with no window (risky steps are refused). Use run_task for a whole task; the "
                         "person must first allow this host (`deskhand mcp allow HOST`).")
STOP_WAIT_S = 120.0  # a cancelled run ends within a model token or an input event; this only bounds a stuck app


def host_of(ctx: ServerRequestContext[Any, Any]) -> str:
    """The name the host gave itself in `initialize`, as Deskhand keeps and shows it (app.link.consent.host_name)."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return host_name(info.name if info is not None else "") or UNNAMED


def host_version(ctx: ServerRequestContext[Any, Any]) -> str:
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return str(info.version or "") if info is not None else ""


def _error(code: int, exc: DeskhandError | str) -> MCPError:
    return MCPError(code=code, message=str(exc))


def _text(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)


class DeskhandServer:
    def __init__(self, paths: Paths, headless: bool = False) -> None:
        self.paths, self.headless = paths, headless
        self.consent = ConsentStore(paths.config)
        self.desk = desk.Desk(paths, headless)
        self.server: Server[Any] = Server("deskhand", version=app.__version__, title="Deskhand",
                                          instructions=HEADLESS_INSTRUCTIONS if headless else INSTRUCTIONS,
                                          on_list_tools=self.list_tools, on_call_tool=self.call_tool)

    async def list_tools(self, ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(tools.TOOLS))

    async def call_tool(self, ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        name = params.name
        if name not in tools.NAMES:
            raise MCPError(code=types.METHOD_NOT_FOUND,
                           message=f"Deskhand has no tool “{name}”; its tools are {', '.join(tools.NAMES)} "
                                   "(tools/list describes them).")
        try:
            args = tools.check_arguments(name, params.arguments)
        except tools.BadArguments as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        host = host_of(ctx)
        if not self.consent.allows(host, name):  # before anything, a screenshot least of all
            why, grant = "", self.consent.grant(host)
            if (grant is None or grant.damaged) and not self.headless:  # a "no" is not asked again
                why = await self.ask_person(ctx, host, name)
            if not self.consent.allows(host, name):  # the store decides, never the answer's line
                log.info("refused %s from %r: not allowed", name, host)
                raise _error(NOT_ALLOWED, not_allowed_message(host, name, self.consent.grant(host), why))
        try:
            result: types.CallToolResult = await getattr(self, f"tool_{name}")(ctx, args)
            return result
        except DeskhandError as exc:
            raise _error(CANNOT, exc) from None

    async def ask_person(self, ctx: ServerRequestContext[Any, Any], host: str, tool: str) -> str:
        """The person is asked in the app's window (started if none runs); the call waits for the answer. What
        became of the question, for the refusal ("" when they answered)."""
        question = in_app.ConsentQuestion(self.paths, host, host_version(ctx), tool)
        log.info("asking the person whether %r may use Deskhand", host)
        try:
            answer = await anyio.to_thread.run_sync(question.wait, abandon_on_cancel=True)
        except DeskhandError as exc:
            return f"Deskhand could not ask them in its window: {exc.what}"
        finally:
            question.close()  # (the host cancelled: the question leaves the screen)
        return "They closed Deskhand's question without answering." if answer == "later" else ""

    async def tool_screenshot(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        png, geometry = await anyio.to_thread.run_sync(desk.screenshot_png, args.get("monitor"))
        # image and text only: some hosts drop the image when structured content comes with it
        return types.CallToolResult(content=[
            types.ImageContent(type="image", data=base64.b64encode(png).decode("ascii"), mime_type="image/png"),
            types.TextContent(type="text", text=json.dumps(geometry, ensure_ascii=False))])

    async def tool_propose(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        token = CancelToken()
        try:  # (a host's cancel returns at once; the token then stops the proposal, here or in the app)
            out = await anyio.to_thread.run_sync(desk.propose, args["task"], self.paths, token, host_of(ctx),
                                                 abandon_on_cancel=True)
        finally:
            token.cancel("the host cancelled")
        return _text(f"Deskhand's model proposes: {out['description']} (not done)", out)

    async def tool_status(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        s = await anyio.to_thread.run_sync(self.desk.status)
        if s["app_problem"]:  # it runs and does not answer: whether a task runs there is not known
            text = s["app_problem"].replace("\n→ ", " ")
        else:
            text = (f"Running run {s['run_id']}: “{s['task']}”, {steps_text(s['steps_done'])} done; {s['last']}"
                    if s["running"] else "No task is running.")
            if s["running"] and s.get("host"):
                text += f" (asked for by “{s['host']}”)"
            text += " The Deskhand app is open." if s["app_running"] else ""
        text += "" if s["model_set_up"] else " No model is set up yet."
        return _text(text, s)

    async def tool_stop(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        return _text(await anyio.to_thread.run_sync(self.desk.stop, host_of(ctx)))

    async def tool_run(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        text, images = await anyio.to_thread.run_sync(desk.run_record, self.paths, args["run_id"],
                                                      bool(args.get("screenshots")))
        content: list[Any] = [types.TextContent(type="text", text=text)]
        content += [types.ImageContent(type="image", data=base64.b64encode(i).decode("ascii"),
                                       mime_type="image/png") for i in images]
        return types.CallToolResult(content=content)

    async def tool_run_task(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        send, receive = anyio.create_memory_object_stream[desk.Progress | None](math.inf)
        loop = anyio.lowlevel.current_token()

        def report(p: desk.Progress | None) -> None:  # on the run's thread
            # the request may be gone (cancelled, the host left): the run then goes on reporting nothing
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(send.send_nowait, p, token=loop)

        run, host = self.desk.claim(args["task"]), host_of(ctx)
        run.background = args.get("background")  # (None: Deskhand's default for another program's task)
        try:  # (starting the app may take a while: a cancel meanwhile reaches the run as soon as it exists)
            await anyio.to_thread.run_sync(self.desk.start, run, args.get("max_steps"),
                                           args.get("auto_approve", "safe"), report, host,
                                           abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            await self._stop_cancelled(run)
            raise
        desk.stop_when_withdrawn(run, lambda: self.consent.allows(host, tools.RUN_TASK), host)
        done = anyio.Event()

        async def watch() -> None:
            await anyio.to_thread.run_sync(run.finished.wait, abandon_on_cancel=True)
            done.set()
            send.close()

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                async with receive:
                    async for p in receive:
                        if p is not None:
                            await ctx.session.report_progress(p.step, None, p.message)
                await done.wait()
        except anyio.get_cancelled_exc_class():
            await self._stop_cancelled(run)
            raise
        if run.error is not None:
            if isinstance(run.error, DeskhandError):
                raise _error(CANNOT, run.error)
            raise _error(types.INTERNAL_ERROR,
                         f"The run failed inside Deskhand: {type(run.error).__name__}: {run.error}")
        r = run.result
        out = {"outcome": r.outcome, "answer": r.answer, "message": r.message, "steps": r.steps, "run_id": r.run_id,
               "needs_person": r.needs_person, "done": run.done}
        text = (f"Run {r.run_id} {r.outcome} after {steps_text(r.steps)}: {r.message}" if r.run_id else
                f"The run {r.outcome} after {steps_text(r.steps)}: {r.message} (It is not in Deskhand's history: "
                "the history could not be written, e.g. a full disk; Deskhand's log says why.)")
        if r.answer:
            text += f"\nAnswer: {r.answer}"
        if run.done:
            text += "\nSteps done:\n" + "\n".join(run.done)
        return _text(text, out)

    @staticmethod
    async def _stop_cancelled(run: desk.CurrentRun) -> None:
        """The host cancelled: stop the run now and wait (shielded) until it has ended, its keys and buttons
        released. The SDK answers a cancelled request with nothing; the run's record says "cancelled by the
        host"."""
        run.cancel(HOST_CANCELLED)
        with anyio.CancelScope(shield=True):
            ended = await anyio.to_thread.run_sync(run.finished.wait, STOP_WAIT_S)
        log.info("run %s %s: %s", run.run_id, "stopped" if ended else "did not end in time", HOST_CANCELLED)


async def serve_stdio(paths: Paths, headless: bool = False) -> int | None:
    """One host on stdin/stdout (one JSON message a line); stderr carries the log. Ends when the host closes
    stdin (None) or a signal stops it (its exit status, once the run going on has stopped: stop_signals)."""
    from mcp.server.stdio import stdio_server

    ds = DeskhandServer(paths, headless)
    answers, to_answer = anyio.create_memory_object_stream[SessionMessage](math.inf)
    async with anyio.create_task_group() as outer:
        loop = anyio.lowlevel.current_token()

        def end(why: str) -> None:  # on the signal's thread
            ds.desk.stop_now(why, STOP_WAIT_S)
            anyio.from_thread.run_sync(outer.cancel_scope.cancel, token=loop)

        with StopSignals(end) as signals:
            lines: Any = CheckedInput(answers)  # (the SDK only iterates over it: `async for line in stdin`)
            async with stdio_server(stdin=lines) as (read, write), anyio.create_task_group() as tg:
                checked_send, checked = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                tg.start_soon(answer_unreadable, read, checked_send, write)
                tg.start_soon(forward, to_answer, write)
                await ds.server.run(checked, write, ds.server.create_initialization_options())
                tg.cancel_scope.cancel()
    return signals.exit_status


async def forward(answers: Any, write: Any) -> None:
    """The answers stdio_input gives to requests the SDK would not answer, onto stdout."""
    async with answers:
        async for message in answers:
            await write.send(message)


async def answer_unreadable(read: Any, forward: Any, write: Any) -> None:
    """A line that is not JSON-RPC gets the spec's answer (a parse error, id null) instead of silence; every
    other message goes on to the server."""
    async with forward:
        async for item in read:
            if isinstance(item, Exception):
                log.info("answered an unreadable message with a parse error (%s)", type(item).__name__)
                await write.send(SessionMessage(message=types.JSONRPCError(jsonrpc="2.0", id=None, error=(
                    types.ErrorData(code=types.PARSE_ERROR, message="Deskhand could not read that message: "
                                    "send one JSON-RPC 2.0 object per line (UTF-8, no line breaks inside).")))))
            else:
                await forward.send(item)
