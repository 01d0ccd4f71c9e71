"""deploy/: the compose file, the Kubernetes manifests and the example settings parse, and
agree with Tacit's own settings: every TACIT_* variable they set is a real setting, the
embedded tacit.toml files load, ports and probe paths match what `tacit serve` listens on."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from adapters.chat.slack import EVENTS_PATH
from bot.settings import Settings, load_settings
from tests.conftest import REPO

DEPLOY = REPO / "deploy"
# Read by bot/settings.py itself (which file to load), not a field of Settings.
NOT_FIELDS = {"TACIT_CONFIG"}

# What an operator fills a ${SECRET} placeholder with: as long as a token must be (16+).
FILLED = "placeholder-secret-0123"


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def manifests() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        documents.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return documents


def setting_exists(variable: str) -> bool:
    """TACIT_GRAPH__NEBULA_PASSWORD names Settings().graph.nebula_password."""
    if variable in NOT_FIELDS:
        return True
    path = variable.removeprefix("TACIT_").lower().split("__")
    model: type[BaseModel] = Settings
    for depth, name in enumerate(path):
        field = model.model_fields.get(name)
        if field is None:
            return False
        annotation = field.annotation
        if depth < len(path) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return False
            model = annotation
    return True


def compose_environment() -> Iterator[tuple[str, str, str]]:
    for name, service in compose()["services"].items():
        environment = service.get("environment", {})
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) for item in environment)
        for key, value in environment.items():
            yield name, key, str(value)


def k8s_environment() -> Iterator[tuple[str, str]]:
    for document in manifests():
        if document["kind"] == "Secret":
            for key in {**document.get("stringData", {}), **document.get("data", {})}:
                yield "Secret " + document["metadata"]["name"], key
        for container in _containers(document):
            for item in container.get("env", []):
                yield f"{document['kind']} {container['name']}", item["name"]


def _containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    spec = document.get("spec", {}).get("template", {}).get("spec", {})
    return list(spec.get("containers", []))


def test_the_setting_lookup_can_fail() -> None:
    assert setting_exists("TACIT_GRAPH__NEBULA_PASSWORD")
    assert setting_exists("TACIT_HOME")
    assert not setting_exists("TACIT_GRAPH__NEBULA_PASWORD")
    assert not setting_exists("TACIT_HOME__X")
    assert not setting_exists("TACIT_API_TOKEN")


def test_compose_parses_and_runs_the_full_stack() -> None:
    services = compose()["services"]
    for needed in ("metad0", "storaged0", "graphd", "etcd", "minio", "milvus", "redis", "tacit",
                   "nginx"):  # fmt: skip
        assert needed in services, needed
    assert services["tacit"]["deploy"]["replicas"] >= 2
    for name, service in services.items():
        if name not in ("nebula-activate",):
            assert "healthcheck" in service or name == "nginx", f"{name} has no healthcheck"


@pytest.mark.parametrize("where", ["compose", "k8s"])
def test_every_tacit_variable_is_a_setting(where: str) -> None:
    if where == "compose":
        variables = [(f"service {s}", key) for s, key, _ in compose_environment()]
    else:
        variables = list(k8s_environment())
    tacit = [(owner, key) for owner, key in variables if key.startswith("TACIT_")]
    assert tacit, "no TACIT_* variable found: the parser is looking in the wrong place"
    unknown = [f"{owner}: {key}" for owner, key in tacit if not setting_exists(key)]
    assert unknown == []


def test_compose_substitutions_are_all_in_env_example() -> None:
    text = (DEPLOY / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", text))
    example = (DEPLOY / ".env.example").read_text()
    defined = set(re.findall(r"^([A-Z0-9_]+)=", example, re.MULTILINE))
    assert used - defined == set()
    assert not any(name.startswith("TACIT_") for name in defined), "compose maps them to TACIT_*"


def test_compose_ports_agree_with_tacit() -> None:
    services = compose()["services"]
    environment = {k: v for s, k, v in compose_environment() if s == "tacit"}
    port = int(environment["TACIT_SERVER__PORT"])
    assert environment["TACIT_SERVER__HOST"] == "0.0.0.0"
    assert f"127.0.0.1:{port}/healthz" in " ".join(services["tacit"]["healthcheck"]["test"])
    nginx = (DEPLOY / "nginx.conf").read_text()
    assert f"http://tacit:{port}" in nginx
    assert f"location = {EVENTS_PATH}" in nginx
    assert "EXPOSE " + str(port) in (DEPLOY / "Dockerfile").read_text()
    addresses = environment["TACIT_GRAPH__NEBULA_ADDRESSES"]
    assert addresses == '["graphd:9669"]'
    assert "--port=9669" in services["graphd"]["command"]
    assert environment["TACIT_VECTOR__URI"] == "http://milvus:19530"
    assert environment["TACIT_STATE__URL"].endswith("@redis:6379/0")


def test_compose_settings_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compose environment with placeholder secrets, over the mounted tacit.toml."""
    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        monkeypatch.delenv(key)
    for _, key, value in compose_environment():
        if key.startswith("TACIT_") and key not in NOT_FIELDS:
            monkeypatch.setenv(key, re.sub(r"\$\{[^}]*\}", FILLED, value))
    settings = load_settings(DEPLOY / "tacit.production.toml")
    assert settings.graph.kind == "nebula"
    assert settings.graph.nebula_addresses == ["graphd:9669"]
    assert settings.server.port == 8080
    assert settings.state.url == f"redis://:{FILLED}@redis:6379/0"


def test_kubernetes_manifests_agree_with_tacit() -> None:
    documents = {d["kind"]: d for d in manifests()}
    for kind in ("ConfigMap", "Deployment", "Service", "Ingress", "Secret"):
        assert kind in documents, kind
    deployment = documents["Deployment"]
    assert deployment["spec"]["replicas"] >= 2
    (container,) = _containers(deployment)
    env = {e["name"]: e.get("value") for e in container["env"]}
    port = int(env["TACIT_SERVER__PORT"])
    (named,) = container["ports"]
    assert named["containerPort"] == port
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": named["name"]}
    service = documents["Service"]
    assert service["spec"]["ports"][0]["targetPort"] == named["name"]
    paths = [p["path"] for r in documents["Ingress"]["spec"]["rules"] for p in r["http"]["paths"]]
    assert EVENTS_PATH in paths
    assert env["TACIT_CONFIG"] == "/etc/tacit/tacit.toml"


def test_the_tacit_toml_files_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        monkeypatch.delenv(key)
    config_map = next(d for d in manifests() if d["kind"] == "ConfigMap")
    in_cluster = tmp_path / "tacit.toml"
    in_cluster.write_text(config_map["data"]["tacit.toml"])
    production = tomllib.loads((DEPLOY / "tacit.production.toml").read_text())
    cluster = tomllib.loads(in_cluster.read_text())
    # The same settings but for the stores' in-cluster addresses.
    assert {k: v for k, v in cluster.items() if k != "graph"} == {
        k: v for k, v in production.items() if k != "graph"
    }
    assert cluster["graph"]["nebula_addresses"] == ["nebula-graphd-svc:9669"]
    for path in (in_cluster, DEPLOY / "tacit.production.toml", DEPLOY / "tacit.example.toml"):
        settings = load_settings(path)
        assert settings.kb == "default", path


def test_every_multi_replica_deployment_takes_telegram_by_webhook(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two replicas long-polling one token conflict: compose and Kubernetes use the webhook,
    with a secret and a URL `tacit serve` registers, on the path nginx and the Ingress route."""
    from adapters.chat.telegram import WEBHOOK_PATH

    environment = {k: v for s, k, v in compose_environment() if s == "tacit"}
    assert environment["TACIT_TELEGRAM__MODE"] == "webhook"
    assert environment["TACIT_TELEGRAM__WEBHOOK_SECRET"].startswith("${")
    assert environment["TACIT_TELEGRAM__WEBHOOK_URL"].startswith("${")
    example = (DEPLOY / ".env.example").read_text()
    assert re.search(rf"^TELEGRAM_WEBHOOK_URL=https://\S+{WEBHOOK_PATH}$", example, re.MULTILINE)
    assert f"location = {WEBHOOK_PATH}" in (DEPLOY / "nginx.conf").read_text()

    documents = manifests()
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (container,) = _containers(deployment)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TACIT_TELEGRAM__MODE"] == "webhook"
    assert env["TACIT_TELEGRAM__WEBHOOK_URL"].endswith(WEBHOOK_PATH)
    (secret,) = [d for d in documents if d["kind"] == "Secret"]
    assert secret["stringData"]["TACIT_TELEGRAM__WEBHOOK_SECRET"]
    (ingress,) = [d for d in documents if d["kind"] == "Ingress"]
    paths = [p["path"] for r in ingress["spec"]["rules"] for p in r["http"]["paths"]]
    assert WEBHOOK_PATH in paths
    host = ingress["spec"]["rules"][0]["host"]
    assert env["TACIT_TELEGRAM__WEBHOOK_URL"] == f"https://{host}{WEBHOOK_PATH}"

    # And the compose environment, filled in, starts Telegram in webhook mode.
    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        monkeypatch.delenv(key)
    for key, value in environment.items():
        if key.startswith("TACIT_") and key not in NOT_FIELDS:
            monkeypatch.setenv(key, re.sub(r"\$\{[^}]*\}", FILLED, value))
    settings = load_settings(DEPLOY / "tacit.production.toml")
    assert settings.telegram.mode == "webhook"
    assert settings.telegram.webhook_secret.get_secret_value() == FILLED
