"""Flags, environment fallbacks and the one-line errors at start."""

from __future__ import annotations

import pytest

from aitenant.settings import (
    Settings,
    SettingsError,
    format_duration,
    load_settings,
    parse_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("1h30m", 5400),
        ("0", 0),
        ("0s", 0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "5x", "m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(600, "10m0s"), (300, "5m0s"), (3600, "1h0m0s"), (45, "45s"), (0, "0s")]
)
def test_go_duration_format(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_defaults_and_env_fallbacks() -> None:
    s = load_settings(
        [], {"POD_NAMESPACE": "ctl", "GATEWAY_NAMESPACE": "gw", "LEADER_ELECT": "true"}
    )
    assert s.aitenant_namespace == "ai-tenants"
    assert s.controller_namespace == "ctl"
    assert s.effective_infra_namespace == "ctl"
    assert s.gateway_namespace == "gw"
    assert s.leader_elect is True
    assert s.deletion_timeout == 600
    assert s.enable_tenant_namespace_discovery is False


def test_flag_beats_env_and_upstream_alias_is_read() -> None:
    s = load_settings(
        ["--gateway-namespace", "flag", "--enable-tenant-namespace-discovery"],
        {"GATEWAY_NAMESPACE": "env", "AITENANT_DELETION_TIMEOUT": "5m"},
    )
    assert s.gateway_namespace == "flag"
    assert s.enable_tenant_namespace_discovery is True
    assert s.deletion_timeout == 300


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--deletion-timeout", "soon"], {}, "--deletion-timeout"),
        ([], {"DELETION_TIMEOUT": "-1m"}, "--deletion-timeout (from $DELETION_TIMEOUT)"),
        (["--aitenant-namespace", "  "], {}, "--aitenant-namespace: must be non-empty"),
        (["--webhook-port", "99999"], {}, "--webhook-port: expected `int` <= 65535"),
        (["--workers", "0"], {}, "--workers: expected `int` >= 1"),
        ([], {"LEADER_ELECT_RETRY_PERIOD": "0s"}, "(from $LEADER_ELECT_RETRY_PERIOD): expected"),
        (["--leader-elect=maybe"], {}, "--leader-elect: invalid boolean"),
        (["--maas-api-url-template", "https://{host}/x"], {}, "unknown placeholder"),
        (["--log-level", "loud"], {}, "--log-level"),
        (["--maas-api-replicas", "0"], {}, "--maas-api-replicas: expected `int` >= 1"),
        ([], {"MAAS_API_REPLICAS": "101"}, "--maas-api-replicas (from $MAAS_API_REPLICAS)"),
        (["--maas-api-max-replicas", "101"], {}, "--maas-api-max-replicas: expected `int` <= 100"),
        (["--maas-api-max-replicas", "0"], {}, "--maas-api-max-replicas: expected `int` >= 1"),
        (
            ["--maas-api-replicas", "4"],
            {},
            "--maas-api-replicas: 4 exceeds --maas-api-max-replicas 3",
        ),
        (
            ["--maas-api-db-secret", "maas-db-other"],
            {},
            '--maas-api-db-secret: "maas-db-other": maas-api reads its database URL only from '
            "the Secret maas-db-config",
        ),
        (
            ["--leader-elect-lease-duration", "5s"],
            {},
            "--leader-elect-lease-duration: need retry period < renew deadline",
        ),
    ],
)
def test_invalid_values_name_the_flag(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(argv, env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_maas_api_url() -> None:
    s = load_settings(["--infra-namespace", "infra"], {})
    assert s.maas_api_url("team-a") == (
        "https://maas-api-team-a.infra.svc:8443/internal/v1/tenants/team-a/api-keys"
    )
    assert s.maas_api_url("models-as-a-service").startswith("https://maas-api.infra.svc")


def test_authorino_namespaces_default_to_upstreams_three() -> None:
    s = load_settings([], {})
    assert s.authorino_namespaces == (
        "kuadrant-system",
        "openshift-operators",
        "rh-connectivity-link",
    )


def test_authorino_namespaces_from_flag_or_env() -> None:
    s = load_settings([], {"AUTHORINO_NAMESPACES": " kuadrant-system , my-authorino,,"})
    assert s.authorino_namespaces == ("kuadrant-system", "my-authorino")
    s = load_settings(["--authorino-namespaces", "a,b,a"], {"AUTHORINO_NAMESPACES": "env"})
    assert s.authorino_namespaces == ("a", "b")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "must name at least one namespace"),
        (" , ", "must name at least one namespace"),
        ("kuadrant-system,Bad_NS", '"Bad_NS" is not a namespace name'),
        ("x" * 64, "is not a namespace name"),
    ],
)
def test_bad_authorino_namespaces_name_the_flag(raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(["--authorino-namespaces", raw], {})
    assert str(info.value).startswith("invalid value for --authorino-namespaces: ")
    assert message in str(info.value)


def test_pod_selectors_default_to_the_gateway_label_and_every_controller_pod() -> None:
    s = load_settings([], {})
    assert s.controller_pods == ()
    assert s.gateway_pods == (("gateway.networking.k8s.io/gateway-name", "{gateway}"),)


def test_pod_selectors_from_flag_or_env() -> None:
    s = load_settings(
        ["--controller-pod-selector", " app.kubernetes.io/name = ctl , tier=ops,"],
        {"GATEWAY_POD_SELECTOR": "example.org/owning-gateway={gateway},x="},
    )
    assert s.controller_pod_selector == "app.kubernetes.io/name=ctl,tier=ops"
    assert s.controller_pods == (("app.kubernetes.io/name", "ctl"), ("tier", "ops"))
    assert s.gateway_pods == (("example.org/owning-gateway", "{gateway}"), ("x", ""))
    assert load_settings(["--gateway-pod-selector", ""], {}).gateway_pods == ()


@pytest.mark.parametrize(
    ("flag", "raw", "message"),
    [
        ("--controller-pod-selector", "app", '"app" is not key=value'),
        ("--controller-pod-selector", "a=b,a=c", '"a" is given twice'),
        # {gateway} means nothing for the controller's own pods
        ("--controller-pod-selector", "a={gateway}", '"{gateway}" is not a label value'),
        ("--controller-pod-selector", "Bad_Prefix/a=b", '"Bad_Prefix/a" is not a label key'),
        ("--controller-pod-selector", "=b", '"" is not a label key'),
        ("--gateway-pod-selector", "a=" + "v" * 64, "is not a label value"),
        ("--gateway-pod-selector", "a=x{gateway}", '"x{gateway}" is not a label value'),
        ("--gateway-pod-selector", "a b=c", '"a b" is not a label key'),
    ],
)
def test_bad_pod_selectors_name_the_flag(flag: str, raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings([flag, raw], {})
    assert str(info.value).startswith(f"invalid value for {flag}: ")
    assert message in str(info.value)


def test_rules_across_values_hold_for_a_settings_built_in_code() -> None:
    settings = Settings(log_level="DEBUG", gateway_name=" gw ")
    assert (settings.log_level, settings.gateway_name) == ("debug", "gw")
    with pytest.raises(ValueError, match="leader_elect_lease_duration: need retry period"):
        Settings(leader_elect_renew_deadline=20.0)
