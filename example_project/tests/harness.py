"""The test harness of the support-agent example: runs scenarios through the real agent and starts
exactly the local services the current replay mode talks to for real."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from services import (
    CHALLENGER_SCRIPTS,
    SCENARIOS,
    BackofficeService,
    LocalService,
    ScriptedModelServer,
    url_for,
)
from support_agent import AgentResult, Provider, ScriptedApprover, SupportAgent

from pytest_agentreplay import AgentReplay

if TYPE_CHECKING:  # the MCP SDK is needed only by the warranty scenario (test_support_mcp.py)
    from support_agent.warranty import WarrantyClient

# Fake keys only: the model servers accept any key with these prefixes. Never put a real key here.
API_KEYS: dict[str, str] = {"openai": "sk-test-support-0001", "anthropic": "sk-ant-test-support-0001"}
BACKOFFICE_URL = url_for("backoffice")
CHALLENGER_MODEL = "support-challenger-1"


@dataclass
class SupportHarness:
    replay: AgentReplay
    sleeps: list[float] = field(default_factory=list)
    services: list[LocalService] = field(default_factory=list)
    agents: list[SupportAgent] = field(default_factory=list)
    backoffice: BackofficeService | None = None
    model_server: ScriptedModelServer | None = None

    def _start(self, service: LocalService) -> Any:
        service.start()
        self.services.append(service)
        return service

    def agent(
        self,
        *,
        provider: Provider = "openai",
        stream: bool = False,
        model_url: str | None = None,
        model: str | None = None,
        approver: ScriptedApprover | None = None,
        backoffice_url: str = BACKOFFICE_URL,
        ticket_timeout: float = 2.0,
        warranty: WarrantyClient | None = None,
    ) -> SupportAgent:
        agent = SupportAgent(
            provider=provider,
            model_base_url=model_url or url_for(provider),
            api_key=API_KEYS[provider],
            orders_url=backoffice_url,
            tickets_url=backoffice_url,
            refunds_url=backoffice_url,
            model=model,
            stream=stream,
            approver=approver or ScriptedApprover({"A1004": True}),
            ticket_timeout=ticket_timeout,
            sleep=self.sleeps.append,  # Retry-After is honoured, without slowing the suite down
            warranty=warranty,
        )
        self.agents.append(agent)
        return agent

    def run(
        self,
        scenario: str,
        *,
        provider: Provider = "openai",
        stream: bool = False,
        approver: ScriptedApprover | None = None,
        ticket_timeout: float = 2.0,
        warranty: WarrantyClient | None = None,
    ) -> AgentResult:
        """Run ``scenario``; starts exactly the services this mode talks to for real. The warranty MCP
        server is not one of them: the agent's tool starts it over stdio when it runs live."""
        spec = SCENARIOS[scenario]
        if self.replay.recording:
            self.backoffice = self._start(BackofficeService())
            self.model_server = self._start(ScriptedModelServer(provider, spec.script))
        elif self.replay.mode == "model-comparison":
            # The provider endpoint is live in model-comparison: it serves the recorded model's script
            # and the challenger's; the plugin swaps the request's model (marker ``model=``).
            self.model_server = self._start(
                ScriptedModelServer(
                    provider,
                    spec.script,
                    id_prefix="live",
                    models={CHALLENGER_MODEL: CHALLENGER_SCRIPTS[scenario]},
                )
            )
        agent = self.agent(
            provider=provider,
            stream=stream,
            approver=approver,
            ticket_timeout=ticket_timeout,
            warranty=warranty,
        )
        conversation = f"conv-{scenario}-{provider}-{'stream' if stream else 'plain'}"
        return agent.handle(spec.message, customer_id=spec.customer_id, conversation_id=conversation)

    def close(self) -> None:
        for agent in self.agents:
            agent.close()
        for service in reversed(self.services):
            service.stop()


def mode_unavailable(mode: str) -> str | None:
    """Why the installed plugin cannot run ``mode`` yet (None: it can). Checked by behaviour, at run time.

    Probes with a throw-away run: model-comparison must send a model call live; sandbox must route a
    tool call to a sandbox service (``sandbox=`` mapping) and inject a ``faults=`` status fault.
    """
    if mode not in _PROBED:
        _PROBED[mode] = _probe(mode)
    return _PROBED[mode]


_PROBED: dict[str, str | None] = {}


def _probe(mode: str) -> str | None:
    import httpx

    from pytest_agentreplay.core.capture import Recorder, RunContext, activate
    from pytest_agentreplay.core.events import RunMeta
    from pytest_agentreplay.intercept import install

    target = BackofficeService(port=0) if mode == "sandbox" else ScriptedModelServer("openai", (), port=0)
    target.start()
    settings: dict[str, Any] = {"allow_hosts": []}
    if mode == "sandbox":
        settings["sandbox"] = {BACKOFFICE_URL: target.url}
        settings["faults"] = [{"route": f"GET {BACKOFFICE_URL}/orders/A1002", "status": 503}]
    ctx = RunContext(Recorder(RunMeta(run_id="probe")), mode=mode, cassette="probe", settings=settings)
    uninstall = install()
    try:
        with activate(ctx), httpx.Client(timeout=5) as client:
            if mode == "sandbox":
                ok = client.get(f"{BACKOFFICE_URL}/orders/A1001").status_code == 200
                faulted = client.get(f"{BACKOFFICE_URL}/orders/A1002").status_code == 503
                if not (ok and faulted and len(target.log) == 1):
                    return "sandbox routing or fault injection is not implemented by pytest_agentreplay yet"
            else:
                body = {"model": "probe", "messages": [{"role": "user", "content": "hi"}]}
                headers = {"authorization": "Bearer sk-test-probe"}
                client.post(f"{target.url}/v1/chat/completions", json=body, headers=headers)
                if len(target.log) != 1:
                    return "model-comparison does not send model calls live in pytest_agentreplay yet"
    except Exception as exc:
        return f"{mode} mode is not available in pytest_agentreplay yet ({type(exc).__name__}: {exc})"
    finally:
        uninstall()
        target.stop()
    return None
